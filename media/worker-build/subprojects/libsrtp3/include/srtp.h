// The libsrtp3 API (versatica's fork, used by mediasoup >= 3.24) over Debian's libsrtp2 2.5.
//
// Only what mediasoup calls: an opaque policy object built by setters, stream removal under its new name, and
// protect/unprotect with separate input and output buffers and size_t lengths. Everything else (init, create,
// dealloc, event handler, profiles, error codes up to 27) is libsrtp2's own, which mediasoup uses unchanged.
// MKI is not supported (mediasoup never uses it).
#ifndef REGISTRY_LIBSRTP3_SHIM_H
#define REGISTRY_LIBSRTP3_SHIM_H

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

// libsrtp2 names its policy struct srtp_policy_t; libsrtp3 uses that name for an opaque pointer. Rename the struct
// while its header is read. The functions taking it keep their C symbols, so linking is unaffected.
#define srtp_policy_t srtp2_policy_t
#include <srtp2/srtp.h>
#undef srtp_policy_t

// The two codes libsrtp3 adds after libsrtp2's last one (srtp_err_status_pkt_idx_adv = 27).
inline constexpr srtp_err_status_t srtp_err_status_buffer_small = static_cast<srtp_err_status_t>(28);
inline constexpr srtp_err_status_t srtp_err_status_cryptex_err  = static_cast<srtp_err_status_t>(29);

// The policy owns its key (libsrtp2 only points at one). Deriving from the libsrtp2 struct lets a policy be passed
// straight to srtp_create().
struct srtp3_shim_policy : srtp2_policy_t
{
	unsigned char key_and_salt[SRTP_MAX_KEY_LEN];
};

typedef srtp3_shim_policy* srtp_policy_t;

inline srtp_err_status_t srtp_policy_create(srtp_policy_t* policy)
{
	// Value-initialised: every libsrtp2 field zero, as libsrtp2 expects of unused ones.
	*policy = new (std::nothrow) srtp3_shim_policy{};

	return *policy ? srtp_err_status_ok : srtp_err_status_alloc_fail;
}

inline void srtp_policy_destroy(srtp_policy_t policy)
{
	delete policy;
}

inline srtp_err_status_t srtp_policy_set_ssrc(srtp_policy_t policy, srtp_ssrc_t ssrc)
{
	policy->ssrc = ssrc;

	return srtp_err_status_ok;
}

inline srtp_err_status_t srtp_policy_set_profile(srtp_policy_t policy, srtp_profile_t profile)
{
	const srtp_err_status_t err = srtp_crypto_policy_set_from_profile_for_rtp(&policy->rtp, profile);

	return err != srtp_err_status_ok ? err : srtp_crypto_policy_set_from_profile_for_rtcp(&policy->rtcp, profile);
}

// libsrtp2 takes the master key and salt as one buffer, key first.
inline srtp_err_status_t srtp_policy_add_key(
  srtp_policy_t policy,
  const uint8_t* key,
  size_t key_len,
  const uint8_t* salt,
  size_t salt_len,
  const uint8_t* /*mki*/,
  size_t mki_len)
{
	if (mki_len != 0 || key_len + salt_len > sizeof(policy->key_and_salt))
	{
		return srtp_err_status_bad_param;
	}

	std::memcpy(policy->key_and_salt, key, key_len);
	std::memcpy(policy->key_and_salt + key_len, salt, salt_len);
	policy->key = policy->key_and_salt;

	return srtp_err_status_ok;
}

inline srtp_err_status_t srtp_policy_set_allow_repeat_tx(srtp_policy_t policy, bool allow)
{
	policy->allow_repeat_tx = allow ? 1 : 0;

	return srtp_err_status_ok;
}

inline srtp_err_status_t srtp_policy_set_window_size(srtp_policy_t policy, size_t window_size)
{
	policy->window_size = window_size;

	return srtp_err_status_ok;
}

// Same meaning as libsrtp2's srtp_remove_stream (SSRC in network byte order).
inline srtp_err_status_t srtp_stream_remove(srtp_t session, uint32_t ssrc)
{
	return srtp_remove_stream(session, ssrc);
}

namespace registry_srtp3_shim
{
	// libsrtp3 transforms from `in` to `out`; libsrtp2 transforms in place with an int length. Copy, then run the
	// libsrtp2 call on `out`, which must have room for the input plus what the transform may append.
	template<class InPlace>
	inline srtp_err_status_t transform(
	  InPlace inPlace, const uint8_t* in, size_t inLen, uint8_t* out, size_t* outLen, size_t room)
	{
		if (inLen > static_cast<size_t>(INT_MAX) - room)
		{
			return srtp_err_status_bad_param;
		}

		if (*outLen < inLen + room)
		{
			return srtp_err_status_buffer_small;
		}

		if (out != in)
		{
			std::memmove(out, in, inLen);
		}

		int len                     = static_cast<int>(inLen);
		const srtp_err_status_t err = inPlace(out, &len);

		if (err == srtp_err_status_ok)
		{
			*outLen = static_cast<size_t>(len);
		}

		return err;
	}
} // namespace registry_srtp3_shim

// C++ overloads beside libsrtp2's C functions of the same names (different parameters, so no clash).
inline srtp_err_status_t srtp_protect(
  srtp_t ctx, const uint8_t* rtp, size_t rtp_len, uint8_t* srtp, size_t* srtp_len, size_t mki_index)
{
	if (mki_index != 0)
	{
		return srtp_err_status_bad_mki;
	}

	return registry_srtp3_shim::transform(
	  [ctx](uint8_t* buf, int* len) { return srtp_protect(ctx, buf, len); },
	  rtp,
	  rtp_len,
	  srtp,
	  srtp_len,
	  SRTP_MAX_TRAILER_LEN);
}

inline srtp_err_status_t srtp_protect_rtcp(
  srtp_t ctx, const uint8_t* rtcp, size_t rtcp_len, uint8_t* srtcp, size_t* srtcp_len, size_t mki_index)
{
	if (mki_index != 0)
	{
		return srtp_err_status_bad_mki;
	}

	// SRTCP also appends the 4-byte E flag and index.
	return registry_srtp3_shim::transform(
	  [ctx](uint8_t* buf, int* len) { return srtp_protect_rtcp(ctx, buf, len); },
	  rtcp,
	  rtcp_len,
	  srtcp,
	  srtcp_len,
	  SRTP_MAX_TRAILER_LEN + 4);
}

inline srtp_err_status_t srtp_unprotect(
  srtp_t ctx, const uint8_t* srtp, size_t srtp_len, uint8_t* rtp, size_t* rtp_len)
{
	return registry_srtp3_shim::transform(
	  [ctx](uint8_t* buf, int* len) { return srtp_unprotect(ctx, buf, len); }, srtp, srtp_len, rtp, rtp_len, 0);
}

inline srtp_err_status_t srtp_unprotect_rtcp(
  srtp_t ctx, const uint8_t* srtcp, size_t srtcp_len, uint8_t* rtcp, size_t* rtcp_len)
{
	return registry_srtp3_shim::transform(
	  [ctx](uint8_t* buf, int* len) { return srtp_unprotect_rtcp(ctx, buf, len); },
	  srtcp,
	  srtcp_len,
	  rtcp,
	  rtcp_len,
	  0);
}

#endif
