/** The account actor's protocol: every event it accepts, and what it emits in answer. */
export interface DevicePublicKey {
  readonly kty: 'EC';
  readonly crv: 'P-256';
  readonly x: string;
  readonly y: string;
}

export interface EnrollingDevice {
  readonly id: string;
  readonly name: string;
  readonly publicKey: DevicePublicKey;
  readonly thumbprint: string;
}

export interface EnrolmentRequest {
  readonly enrolmentId: string;
  readonly device: EnrollingDevice;
  /** SHA-256 of the nonce handed to the enrolling device; the nonce itself is never stored. */
  readonly nonceHash: string;
  readonly expiresAt: number;
  /**
   * Who asked, as an opaque digest of the client address: an approval list is shared fairly between requesters. Absent
   * on enrolments stored before it existed.
   */
  readonly requester?: string;
}

export type AccountEvent =
  | { readonly type: 'account.open'; readonly handle: string; readonly enrolment: EnrolmentRequest; readonly at: number }
  | { readonly type: 'account.enrolment.request'; readonly enrolment: EnrolmentRequest; readonly at: number }
  | {
      readonly type: 'account.enrolment.complete';
      readonly enrolmentId: string;
      readonly nonceHash: string;
      /**
       * false: the enrolling device's actor may still lapse, so an admission is announced (`account.enrolmentAdmissible`)
       * instead of made. Absent on completions journaled before device actors could lapse, which admitted.
       */
      readonly deviceKept?: boolean;
      readonly at: number;
    }
  | {
      readonly type: 'account.enrolment.decide';
      readonly enrolmentId: string;
      readonly decision: 'admit' | 'refuse';
      readonly byDeviceId: string;
      readonly at: number;
    }
  | { readonly type: 'account.device.remove'; readonly deviceId: string; readonly byDeviceId: string; readonly at: number }
  | { readonly type: 'account.devices.revokeOthers'; readonly byDeviceId: string; readonly at: number }
  | { readonly type: 'account.signOut'; readonly deviceId: string; readonly at: number }
  /**
   * Ends a first enrolment past its deadline now, without waiting for its timer (see `abandoned`): a new start asks for
   * this account's handle. `thumbprint`: the key of the device starting it; the same key as the first enrolment's is
   * that device starting again (its answer was lost), which may take the handle over at once.
   */
  | { readonly type: 'account.lapse'; readonly thumbprint?: string; readonly at: number }
  | { readonly type: 'timer.due'; readonly name: string; readonly dueAt: number; readonly at: number };

export type AccountRefusalCode =
  | 'account_not_open'
  | 'enrolment_not_found'
  | 'enrolment_pending'
  | 'enrolment_refused'
  | 'enrolment_proof_invalid'
  | 'enrolment_already_decided'
  | 'device_not_found'
  | 'device_not_active'
  | 'last_device'
  | 'device_limit_reached';

export type AccountEmitted =
  | { readonly type: 'account.refused'; readonly code: AccountRefusalCode }
  | { readonly type: 'account.enrolled'; readonly deviceId: string; readonly epoch: number }
  | { readonly type: 'account.lapsed' }
  | { readonly type: 'account.enrolmentAdmissible'; readonly deviceId: string }
  | { readonly type: 'account.enrolmentRequested'; readonly enrolmentId: string }
  | { readonly type: 'account.enrolmentDecided'; readonly enrolmentId: string; readonly decision: 'admit' | 'refuse' }
  | {
      readonly type: 'account.devicesRemoved';
      readonly deviceIds: readonly string[];
      readonly epoch: number;
      /** Removed devices the account no longer remembers: their device actors may end. */
      readonly forgotten: readonly string[];
    };
