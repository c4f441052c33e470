/* uvcl/export.h — what libuvcl exports.
 *
 * libuvcl is built with hidden visibility: only declarations marked
 * UVCL_EXPORT, the API of these public headers, are in its dynamic symbol
 * table, so a consumer can link only against that API. test/abi checks the
 * exported symbols against the headers. */
#ifndef UVCL_EXPORT_H
#define UVCL_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define UVCL_EXPORT __attribute__((visibility("default")))
#define UVCL_HIDDEN __attribute__((visibility("hidden")))
#else
#define UVCL_EXPORT
#define UVCL_HIDDEN
#endif

#endif /* UVCL_EXPORT_H */
