/* The one mark of what libpicoll.so exports: the MPI wrappers, the public API of include/picoll.h,
 * the MPIX_* extensions and the tests' counters (picoll_test_*). Everything else is built with
 * -fvisibility=hidden. */
#ifndef PICOLL_EXPORT_H
#define PICOLL_EXPORT_H

#define PICOLL_EXPORT __attribute__((visibility("default")))

#endif
