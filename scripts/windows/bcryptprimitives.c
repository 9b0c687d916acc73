/*
 * A stand-in for Windows' bcryptprimitives.dll, for running Windows test binaries under Wine 8.
 *
 * Rust's standard library (1.78 and later) takes its random bytes (the seeds of `HashMap`'s
 * hasher) from `ProcessPrng` in bcryptprimitives.dll, which Wine 8 does not provide: the
 * executable then fails to start (status c0000135). scripts/windows-wine.sh builds this file
 * with mingw and copies the DLL beside each executable it runs; Windows itself never needs it.
 *
 * Build: x86_64-w64-mingw32-gcc -shared -o bcryptprimitives.dll bcryptprimitives.c \
 *            bcryptprimitives.def -ladvapi32
 */
#include <windows.h>
#include <ntsecapi.h>

/* Fills `data` with `len` random bytes, from RtlGenRandom (advapi32's SystemFunction036). */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!RtlGenRandom(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
