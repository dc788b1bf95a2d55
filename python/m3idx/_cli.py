"""The wheel's `m3idx` console command: libm3idx.so's CLI (m3idx_cli_main, the same entry point
the archive's bin/m3idx calls), run in this process, so the wheel needs no executable of its own."""
import ctypes
import os
import signal
import sys

from ._capi import library


def main(argv=None):
    """Runs `m3idx ARGS...` and returns its exit status (0 ok, 1 error, 2 usage)."""
    args = [b"m3idx"] + [os.fsencode(a) for a in (sys.argv[1:] if argv is None else argv)]
    lib = library()
    cli = lib.m3idx_cli_main
    cli.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    cli.restype = ctypes.c_int
    # As a program, not as Python: Ctrl-C ends it at once (Python's handler would wait for the C
    # call to return) and a closed pipe (`m3idx ... | head`) ends it quietly.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    status = cli(len(args), (ctypes.c_char_p * (len(args) + 1))(*args, None))
    ctypes.CDLL(None).fflush(None)  # the CLI writes through C stdio: out before Python exits
    return status


if __name__ == "__main__":
    sys.exit(main())
