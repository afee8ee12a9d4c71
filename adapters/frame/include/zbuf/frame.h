/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/frame.h
 * @brief Length-prefixed framing over a zbuf byte stream, without copying
 *        the messages.
 *
 * The `zbuf-frame` library (pkg-config `zbuf-frame`, CMake target
 * `zbuf::frame`), which needs only the core: it works on any byte stream
 * delivered as zbufs (the libuv adapter's reads, a socket adapter's
 * receives, a UDP byte stream, a test's hand-made chunks).  `zbuf-uv`
 * links it, so its users include this header without naming it.
 *
 * A *frame* is a length field followed by that many payload bytes.  The
 * length field is a fixed-size big- or little-endian integer, or a LEB128
 * varint (#zbuf_frame_len_t).
 *
 * **Decoding.**  Received zbufs are appended to the decoder's stream zbuf
 * (zbuf_frame_decoder_feed(), a segment move, no copy).
 * zbuf_frame_decoder_next() reads the length field with a zbuf cursor, so a
 * header that straddles two reads (two segments) is decoded like any other,
 * and once the whole frame is buffered it splits the frame off the front of
 * the stream with zbuf_split_head() and trims the header: the message zbuf
 * shares the receive buffers, no payload byte is copied.  A partial frame
 * waits for more bytes.  A length above the configured maximum, or a
 * malformed varint, is rejected as soon as the header is read, before any
 * payload is awaited: the decoder never allocates according to what a peer
 * claims, and the bytes it buffers stay below header + maximum + one read.
 * An error is sticky: every later call returns it, and the connection should
 * be closed.
 *
 * **A frame must fit in what its connection may hold.**  Bytes read into
 * pool buffers (zbuf/pool.h) hold those buffers until the frame is taken,
 * and a reader can hold only so many: the limit of the quota its buffers
 * are charged to (the libuv adapter charges every stream's buffers to the
 * stream's quota, see zbuf_uv_read_set_limit()), or the pool's capacity.
 * A frame that needs more would wait forever and, holding what it has,
 * stall every reader of the pool.  So while a frame is incomplete the
 * decoder counts the pool buffers its bytes hold and the fewest the rest
 * could need, and refuses the frame with `-EMSGSIZE` (sticky, as for a
 * length above `max_payload`) as soon as that exceeds the limit: at once
 * when the header says so, or when the buffers are full and the frame is
 * still short.  Nothing is checked for bytes in other memory.  Set
 * `max_payload` (and the stream's limit) to what a connection may send;
 * this check is the safety net.
 *
 * **Idle cost.**  A decoder with no byte buffered holds no zbuf and no
 * buffer.
 *
 * **Encoding.**  zbuf_frame_encode() writes the length field in front of a
 * message: into the first buffer's headroom when it has some, otherwise
 * into a small segment of a header slab of the calling thread (a 1 KiB
 * buffer that many headers share, reused once no header uses it), so that
 * framing messages whose first buffer is shared (received or duplicated
 * ones) allocates nothing in the steady state.  The payload is not touched.
 * zbuf_frame_thread_flush() gives a thread's slabs back.
 *
 * @code
 * // in a zbuf_uv_read_cb:
 * if (zbuf_frame_decoder_feed(dec, z) != 0) { zbuf_delete(z); close... }
 * zbuf_t *msg;
 * int rc;
 * while ((rc = zbuf_frame_decoder_next(dec, &msg)) == 0)
 *     handle(msg);                 // owns msg
 * if (rc != -EAGAIN)               // -EMSGSIZE, -EBADMSG: protocol error
 *     close the connection;
 * @endcode
 *
 * **Threads.**  A decoder is used by one thread at a time.
 */
#ifndef ZBUF_FRAME_H
#define ZBUF_FRAME_H

#include <stdbool.h>
#include <zbuf/zbuf.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_FRAME_STATIC)
#define ZBUF_FRAME_EXPORT
#elif defined(ZBUF_FRAME_BUILDING)
#define ZBUF_FRAME_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_FRAME_EXPORT
#endif
/** @endcond */

/** How the length field is encoded. */
typedef enum zbuf_frame_len {
    ZBUF_FRAME_BE32 = 0, /**< 4 bytes, big-endian (network order); the default */
    ZBUF_FRAME_BE16,     /**< 2 bytes, big-endian */
    ZBUF_FRAME_LE32,     /**< 4 bytes, little-endian */
    ZBUF_FRAME_BE64,     /**< 8 bytes, big-endian */
    ZBUF_FRAME_VARINT,   /**< LEB128 varint, 1 to 10 bytes, shortest form only */
} zbuf_frame_len_t;

/** Largest header, in bytes (a 64-bit varint). */
#define ZBUF_FRAME_MAX_HEADER 10

/** Framing parameters, shared by both ends of a connection. */
typedef struct zbuf_frame_opts {
    zbuf_frame_len_t len_kind;  /**< the length field's encoding */
    bool len_includes_header;   /**< the length counts the header bytes too
                                     (then a length below the header size is
                                     malformed) */
    size_t max_payload;         /**< largest payload accepted or encoded */
    bool keep_header;           /**< zbuf_frame_decoder_next() returns each
                                     frame with its length field in front, for
                                     code that forwards frames unchanged
                                     (relays, brokers, echo) */
    size_t copy_max;            /**< zbuf_frame_append() copies payloads of at
                                     most this many bytes instead of
                                     referencing them (0: never copy) */
} zbuf_frame_opts_t;

/** Default @c copy_max: below about this size a copy costs less than the
 *  bookkeeping of a reference (see @ref benchmarks_uv "the libuv section of
 *  the benchmarks", docs/benchmarks.md). */
#define ZBUF_FRAME_DEFAULT_COPY_MAX 4096

/** Default @c max_payload: 16 MiB. */
#define ZBUF_FRAME_DEFAULT_MAX (16u << 20)

/**
 * @brief Fill @p o with the defaults: 4-byte big-endian length of the
 *        payload alone, payloads up to #ZBUF_FRAME_DEFAULT_MAX, headers
 *        stripped, payloads up to #ZBUF_FRAME_DEFAULT_COPY_MAX copied by
 *        zbuf_frame_append().
 */
ZBUF_FRAME_EXPORT void zbuf_frame_opts_default(zbuf_frame_opts_t *o);

/** An opaque frame decoder: the stream zbuf and the parsing state. */
typedef struct zbuf_frame_decoder zbuf_frame_decoder_t;

/**
 * @brief Create a decoder.
 *
 * @param o  framing parameters (copied), or NULL for the defaults.
 * @param[out] out  receives the decoder; delete it with
 *                  zbuf_frame_decoder_delete().
 * A `max_payload` larger than the length field can express (65535 for
 * #ZBUF_FRAME_BE16, less the header when the length includes it) is lowered
 * to that limit.
 *
 * @return 0; `-EINVAL` (unknown length kind or zero maximum); `-ENOMEM`.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_decoder_create(const zbuf_frame_opts_t *o,
                                                zbuf_frame_decoder_t **out);

/**
 * @brief Delete a decoder and the bytes it still buffers.  NULL is a no-op.
 */
ZBUF_FRAME_EXPORT void zbuf_frame_decoder_delete(zbuf_frame_decoder_t *d);

/**
 * @brief Append received bytes to the decoder's stream.
 *
 * @param d   the decoder.
 * @param in  the bytes; **consumed** on success (its segments move into the
 *            stream, no byte is copied).  An empty zbuf is accepted.
 * @return 0; `-EINVAL`; `-ENOMEM`; the sticky error after a rejected frame
 *         (`-EMSGSIZE`, `-EBADMSG`).  On error the caller still owns @p in.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_decoder_feed(zbuf_frame_decoder_t *d, zbuf_t *in);

/**
 * @brief Take the next whole frame's payload off the stream.
 *
 * @param d  the decoder.
 * @param[out] msg  receives a new zbuf holding the payload (sharing the
 *                  received buffers; possibly empty), preceded by the
 *                  length field if the options say `keep_header`; the
 *                  caller deletes it.
 * @return 0;
 *         `-EAGAIN` when the next frame is not complete yet (feed more);
 *         `-EMSGSIZE` when its length exceeds `max_payload`, or it can
 *         never fit in the pool buffers its connection may hold (see the
 *         file comment);
 *         `-EBADMSG` when its length field is malformed (an over-long or
 *         non-shortest varint, or a length below the header size when it
 *         includes the header);
 *         `-ENOMEM` (nothing changed: call again);
 *         `-EINVAL`.  `-EMSGSIZE` and `-EBADMSG` are sticky.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_decoder_next(zbuf_frame_decoder_t *d, zbuf_t **msg);

/**
 * @brief Look at the next whole frame's payload in place, without taking it.
 *
 * The cheap path for small messages: no zbuf is made.  Succeeds when the
 * frame is whole and its payload lies in one memory segment; @p *payload
 * then points into the receive buffer and stays valid until the decoder is
 * fed, skipped, or asked for the next frame.  Follow with
 * zbuf_frame_decoder_skip() to drop the frame, or zbuf_frame_decoder_next()
 * to take it as a zbuf after all.
 *
 * @param[out] payload  receives the address of the payload (not NULL even
 *                      for an empty payload).
 * @param[out] len      receives its length.
 * @return 0; `-EAGAIN` (not whole yet); `-ENOBUFS` (whole, but spread over
 *         several segments: take it with zbuf_frame_decoder_next());
 *         `-EMSGSIZE`, `-EBADMSG` (sticky); `-EINVAL`.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_decoder_peek(zbuf_frame_decoder_t *d, const void **payload,
                                              size_t *len);

/**
 * @brief Drop the next whole frame (typically after zbuf_frame_decoder_peek()).
 *
 * Trims the stream's front; never allocates.  Buffers that no longer hold
 * any buffered byte are released.
 *
 * @return 0; `-EAGAIN` (not whole yet); the sticky error; `-EINVAL`.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_decoder_skip(zbuf_frame_decoder_t *d);

/**
 * @brief Take every whole frame buffered, headers included, as one zbuf.
 *
 * For code that forwards frames in bulk (a relay, an echo): the frames at
 * the front of the stream are located by reading their headers with a
 * cursor, then split off together with one zbuf_split_head(), so the cost
 * per frame is one header read, not one zbuf.  Frames are taken while their
 * total stays within @p max_bytes (0: no limit); a first frame larger than
 * @p max_bytes is still taken, alone.  A malformed or oversized header
 * after some whole frames ends the run: those frames are returned and the
 * error comes with the next call.
 *
 * @param d  the decoder.
 * @param max_bytes  soft limit on the bytes taken, or 0.
 * @param[out] frames  receives a new zbuf holding the frames, each with its
 *                     header (the caller deletes it).
 * @param[out] count  if not NULL, receives the number of frames.
 * @return 0; `-EAGAIN` (no whole frame buffered); `-EMSGSIZE`, `-EBADMSG`
 *         (sticky, as for zbuf_frame_decoder_next()); `-ENOMEM` (nothing
 *         changed); `-EINVAL`.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_decoder_next_frames(zbuf_frame_decoder_t *d, size_t max_bytes,
                                                     zbuf_t **frames, size_t *count);

/** @brief Bytes buffered in the stream, not yet returned as frames. */
ZBUF_FRAME_EXPORT size_t zbuf_frame_decoder_buffered(const zbuf_frame_decoder_t *d);

/**
 * @brief Payload length of the frame being awaited, once its header arrived.
 *
 * @param[out] len  receives the payload length.
 * @return 0; `-EAGAIN` if the header is not complete yet; the sticky error.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_decoder_pending(const zbuf_frame_decoder_t *d, size_t *len);

/**
 * @brief Prepend the length field to @p msg, making it a frame.
 *
 * Only the header bytes are written: into the first buffer's headroom when
 * it is writable, otherwise into a header slab of the calling thread, as a
 * new segment of a few bytes (see the file comment); the payload is
 * neither copied nor touched.  Allocates only when every slab of the
 * thread still has headers in use (the first frames, or very many frames
 * alive at once).
 *
 * @param o    framing parameters, or NULL for the defaults.
 * @param msg  the payload (borrowed; modified in place).
 * @return 0; `-EINVAL`; `-EMSGSIZE` if @p msg is longer than `max_payload`;
 *         `-ENOMEM`.  On error @p msg is unchanged.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_encode(const zbuf_frame_opts_t *o, zbuf_t *msg);

/**
 * @brief Append @p msg to @p out as one frame, choosing per message between
 *        referencing and copying.
 *
 * The way to batch many outgoing frames into one zbuf_uv_write().  The
 * header goes into @p out's tailroom (@p out grows by chunks of
 * #ZBUF_FRAME_APPEND_CHUNK bytes, so the headers and small payloads of many
 * frames share one buffer).  A payload of at most `copy_max` bytes (in
 * memory) is copied there too, counted in zbuf_stats_t::bytes_copied: for
 * small messages a copy is cheaper than a segment; a larger one is moved in
 * by reference (its segments move, no byte is copied).
 *
 * @param o    framing parameters, or NULL for the defaults.
 * @param out  the zbuf to append to.
 * @param msg  the payload; **consumed** on success.
 * @return 0; `-EINVAL`; `-EMSGSIZE`; `-ENOMEM`.  On error @p out and
 *         @p msg are unchanged and the caller keeps @p msg.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_append(const zbuf_frame_opts_t *o, zbuf_t *out, zbuf_t *msg);

/**
 * @brief Append a frame whose payload is copied from memory (@p len bytes
 *        at @p data, borrowed for the call) to @p out.
 *
 * Header and payload go into @p out's tailroom, growing it by
 * #ZBUF_FRAME_APPEND_CHUNK bytes when needed; the payload bytes are counted
 * in zbuf_stats_t::bytes_copied.  With zbuf_frame_decoder_peek() this
 * forwards small messages without making a zbuf for each.
 *
 * @return 0; `-EINVAL`; `-EMSGSIZE`; `-ENOMEM`.  On error @p out is
 *         unchanged.
 */
ZBUF_FRAME_EXPORT int zbuf_frame_append_copy(const zbuf_frame_opts_t *o, zbuf_t *out,
                                             const void *data, size_t len);

/** Bytes by which zbuf_frame_append() grows its output at a time: one
 *  64 KiB allocation with the buffer's descriptor.  Fewer, larger chunks
 *  measured clearly faster than 16 KiB ones (@ref benchmarks_uv "the libuv
 *  section of the benchmarks", docs/benchmarks.md); the unused rest of the
 *  last chunk lives as long as the output zbuf. */
#define ZBUF_FRAME_APPEND_CHUNK 65408

/**
 * @brief Give back the calling thread's header slabs (zbuf_frame_encode()).
 *
 * A slab headers still use goes when the last of them does; an idle one at
 * once.  Threads give theirs back when they exit; call this earlier before
 * checking the live counters (zbuf_stats_get()) on a thread that framed
 * messages, or to free the memory.  Framing again afterwards allocates new
 * slabs.
 */
ZBUF_FRAME_EXPORT void zbuf_frame_thread_flush(void);

/**
 * @brief Buffers held by the header slabs of every thread, a snapshot.
 *
 * They count in zbuf_stats_t::live_bufs: a server checking its live
 * counters while idle expects exactly these (and zbuf_uv_stats()'s idle
 * read buffers).
 */
ZBUF_FRAME_EXPORT size_t zbuf_frame_header_bufs(void);

/**
 * @brief Size of the header zbuf_frame_encode() would write for a payload
 *        of @p len bytes.
 * @return 1 to #ZBUF_FRAME_MAX_HEADER; 0 for invalid options.
 */
ZBUF_FRAME_EXPORT size_t zbuf_frame_header_size(const zbuf_frame_opts_t *o, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_FRAME_H */
