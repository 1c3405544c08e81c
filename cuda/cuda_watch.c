/* The stream workspaces (picoll_cuda_ws_set_stream), listed for their watch
 * (picoll_cuda_stream_watch, cuda_end.c), which looks at each one's running launch. */
#include "build-config.h"
#include "cuda/cuda_ws_int.h"

#include <pthread.h>
#include <stdlib.h>

static picoll_cuda_ws_t *watch_list;
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;

void picoll_cuda_ws_set_stream(picoll_cuda_ws_t *ws, picoll_cu_stream_t stream)
{
    ws->stream = stream;
    ws->on_stream = 1;
    pthread_mutex_lock(&watch_lock);
    ws->watch_next = watch_list;
    watch_list = ws;
    pthread_mutex_unlock(&watch_lock);
}

void picoll_cuda_ws_each_stream(void (*fn)(picoll_cuda_ws_t *ws))
{
    pthread_mutex_lock(&watch_lock);
    for (picoll_cuda_ws_t *ws = watch_list; ws != NULL; ws = ws->watch_next) {
        fn(ws);
    }
    pthread_mutex_unlock(&watch_lock);
}

void picoll_cuda_watch_remove(picoll_cuda_ws_t *ws)
{
    pthread_mutex_lock(&watch_lock);
    for (picoll_cuda_ws_t **link = &watch_list; *link != NULL; link = &(*link)->watch_next) {
        if (*link == ws) {
            *link = ws->watch_next;
            break;
        }
    }
    pthread_mutex_unlock(&watch_lock);
    free(ws->watch_late);
    ws->watch_late = NULL;
}
