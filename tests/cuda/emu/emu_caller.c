/* libpicoll_emu_caller.so: a library whose file name contains "libpicoll", so that the emulated
 * GPU takes its calls for calls from inside picoll (rule "unchosen-device"). The self-test hands it
 * a driver entry point and its argument. Not a tail call: the driver must see this library as its
 * caller. */
#include <stdint.h>

__attribute__((noinline)) int emu_caller_call1(int (*fn)(void *), void *arg);
__attribute__((noinline)) int emu_caller_call1(int (*fn)(void *), void *arg)
{
    int rc = fn(arg);
    __asm__ volatile("" ::: "memory");
    return rc;
}

__attribute__((noinline)) int emu_caller_call2(int (*fn)(void *, int), void *arg, int i);
__attribute__((noinline)) int emu_caller_call2(int (*fn)(void *, int), void *arg, int i)
{
    int rc = fn(arg, i);
    __asm__ volatile("" ::: "memory");
    return rc;
}
