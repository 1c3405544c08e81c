/* The info keys of a stream object (pmpi/stream_int.h): MPIX_Info_set_hex writes a value as
 * hexadecimal, MPIX_Stream_create reads the CUDA stream handle from "type" and "value". */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "util/export.h"
#include "mem/cudrv.h"
#include "pmpi/errors.h"
#include "pmpi/stream_int.h"

#include <picoll.h>

#include <stdlib.h>
#include <string.h>

#ifdef PICOLL_MPIX_STREAM /* picoll's own type; else the MPI's MPIX_Info_set_hex */

/* The value's bytes, two lowercase hex digits each, in memory order. */
PICOLL_EXPORT int MPIX_Info_set_hex(MPI_Info info, const char *key, const void *value,
                                    int value_size)
{
    static const char digits[] = "0123456789abcdef";
    if (key == NULL || value == NULL || value_size <= 0 || value_size > 256) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Info_set_hex: key, value and value_size (1 to "
                                   "256 bytes) are needed, value_size is %d",
                                   value_size);
    }
    char text[2 * 256 + 1];
    const unsigned char *b = value;
    for (int i = 0; i < value_size; i++) {
        text[2 * i] = digits[b[i] >> 4];
        text[2 * i + 1] = digits[b[i] & 15];
    }
    text[2 * value_size] = '\0';
    return PMPI_Info_set(info, key, text);
}

#endif /* PICOLL_MPIX_STREAM */

/* ---- the stream handle, as MPIX_Stream_create reads it ---- */

/* The info's key "type" into type (64 bytes); 0 where it has none. */
static int info_type(MPI_Info info, char *type)
{
    int flag = 0;
    type[0] = '\0';
    if (info != MPI_INFO_NULL) {
        PMPI_Info_get(info, "type", 63, type, &flag);
    }
    return flag;
}

static int type_is_cuda(const char *type)
{
    return strcmp(type, "cudaStream_t") == 0 || strcmp(type, "CUstream") == 0;
}

int picoll_stream_info_is_cuda(MPI_Info info)
{
    char type[64];
    return info_type(info, type) && type_is_cuda(type);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The n bytes that text holds as MPIX_Info_set_hex writes them: two hex digits a byte, and in
 * MPICH's (4.1 and later) "[k]" for a run of k zero bytes. 0, or -1 if text is not n bytes so. */
static int hex_decode(const char *text, unsigned char *out, size_t n)
{
    size_t got = 0;
    while (*text != '\0') {
        if (*text == '[') {
            char *end;
            unsigned long zeros = strtoul(text + 1, &end, 10);
            if (end == text + 1 || *end != ']' || zeros > n - got) {
                return -1;
            }
            memset(out + got, 0, zeros);
            got += zeros;
            text = end + 1;
            continue;
        }
        int hi = hex_digit(text[0]), lo = hi < 0 ? -1 : hex_digit(text[1]);
        if (lo < 0 || got == n) {
            return -1;
        }
        out[got++] = (unsigned char)(hi << 4 | lo);
        text += 2;
    }
    return got == n ? 0 : -1;
}

int picoll_stream_info_handle(MPI_Info info, picoll_cu_stream_t *cu)
{
    char type[64], value[4 * sizeof(void *) + 2] = "";
    int flag = 0;

    if (!info_type(info, type)) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_create: the info has no key \"type\": "
                                   "picoll's streams are CUDA streams (type \"cudaStream_t\", "
                                   "value set with MPIX_Info_set_hex)");
    }
    if (!type_is_cuda(type)) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_create: info type \"%s\": picoll supports "
                                   "\"cudaStream_t\" only",
                                   type);
    }
    PMPI_Info_get(info, "value", (int)sizeof(value) - 1, value, &flag);
    unsigned char bytes[sizeof(void *)];
    if (!flag || hex_decode(value, bytes, sizeof(bytes)) != 0) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_create: info \"value\" must hold the "
                                   "stream handle (%zu bytes, MPIX_Info_set_hex), not \"%s\"",
                                   sizeof(void *), flag ? value : "(no key \"value\")");
    }
    memcpy(cu, bytes, sizeof(*cu));
    return MPI_SUCCESS;
}
