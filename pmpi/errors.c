/* The MPI errors raised for a staged call (see errors.h): the call's error handler, and the error
 * codes of refused calls, each with a text naming the call and the argument. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "util/log.h"
#include "pmpi/errors.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int picoll_raise_on(int obj_kind, const void *obj, int code)
{
    if (obj_kind == PICOLL_OBJ_WIN) {
        PMPI_Win_call_errhandler(*(const MPI_Win *)obj, code);
    } else if (obj_kind == PICOLL_OBJ_FILE) {
        PMPI_File_call_errhandler(*(const MPI_File *)obj, code);
    } else {
        PMPI_Comm_call_errhandler(
            obj_kind == PICOLL_OBJ_COMM ? *(const MPI_Comm *)obj : MPI_COMM_WORLD, code);
    }
    return code;
}

int picoll_raise_call(const picoll_call_t *c, int code)
{
    return picoll_raise_on(c->obj_kind, &c->obj, code);
}

/* An error code whose text is msg, in one of picoll's own error classes (named by cls_text;
 * MPICH garbles the text of a code added to a predefined class): the MPI's error handlers print
 * it, MPI_Error_string returns it. Codes are made once per distinct text (a handful: one per
 * refused call and argument); where the MPI cannot add any, fallback. */
static int error_code(const char *cls_text, const char *msg, int fallback)
{
    static struct {
        char msg[200];
        int code;
    } made[64];
    static struct {
        const char *text;
        int cls;
    } classes[4];
    static int nmade, nclasses;
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int code = fallback, cls = -1;
    pthread_mutex_lock(&m);
    for (int i = 0; i < nmade; i++) {
        if (strcmp(made[i].msg, msg) == 0) {
            pthread_mutex_unlock(&m);
            return made[i].code;
        }
    }
    for (int i = 0; i < nclasses; i++) {
        if (classes[i].text == cls_text) {
            cls = classes[i].cls;
        }
    }
    if (cls < 0 && nclasses < 4 && PMPI_Add_error_class(&cls) == MPI_SUCCESS &&
        PMPI_Add_error_string(cls, cls_text) == MPI_SUCCESS) {
        classes[nclasses].text = cls_text;
        classes[nclasses++].cls = cls;
    }
    if (cls >= 0 && nmade < 64 && PMPI_Add_error_code(cls, &code) == MPI_SUCCESS &&
        PMPI_Add_error_string(code, msg) == MPI_SUCCESS) {
        snprintf(made[nmade].msg, sizeof(made[nmade].msg), "%s", msg);
        made[nmade++].code = code;
    } else {
        code = fallback;
    }
    pthread_mutex_unlock(&m);
    return code;
}

static const char refused_class[] = "picoll: CUDA device memory refused";
static const char stream_class[] = "picoll: stream-ordered call refused";

int picoll_raise_stream(MPI_Comm comm, int fallback, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    picoll_warn("%s", msg);
    return picoll_raise_on(comm == MPI_COMM_NULL ? PICOLL_OBJ_NONE : PICOLL_OBJ_COMM, &comm,
                           error_code(stream_class, msg, fallback));
}

int picoll_raise_refused(const picoll_call_t *c, const char *arg, const char *why)
{
    char msg[200];
    snprintf(msg, sizeof(msg), "picoll: %s: %s is CUDA device memory, %s", c->fn, arg, why);
    picoll_warn("%s", msg);
    return picoll_raise_call(c, error_code(refused_class, msg, MPI_ERR_BUFFER));
}
