/** Why a room media call was refused; the control plane maps `code` to its own error message. */
export type MediaErrorCode =
  | 'room_closed'
  | 'media_unavailable'
  | 'peer_not_found'
  | 'transport_not_found'
  | 'already_connected'
  | 'wrong_direction'
  | 'producer_not_found'
  | 'producer_exists'
  | 'consumer_not_found'
  | 'invalid_source'
  | 'invalid_parameters'
  | 'transport_limit'
  | 'cannot_consume';

export class MediaError extends Error {
  readonly code: MediaErrorCode;
  override readonly name = 'MediaError';

  constructor(code: MediaErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}
