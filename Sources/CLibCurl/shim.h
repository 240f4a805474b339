// libcurl for Swift: curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call, so typed wrappers pass each kind of argument.
#ifndef CAREGATE_CURL_SHIM_H
#define CAREGATE_CURL_SHIM_H

#include <curl/curl.h>

static inline CURLcode caregate_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode caregate_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode caregate_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode caregate_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

typedef size_t (*caregate_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode caregate_curl_setopt_callback(CURL *handle, CURLoption option, caregate_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

static inline CURLcode caregate_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode caregate_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

#endif
