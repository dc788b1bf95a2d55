/* An executable's entry under the glibc 2.28 baseline (see Shims.c): crt1.o of glibc 2.34 and
 * later calls __libc_start_main@GLIBC_2.34 with no init function, since that glibc runs the
 * program's constructors itself. The old version (GLIBC_2.2.5, still exported) runs only the init
 * function it is given, so this passes one that does what 2.28's __libc_csu_init did: .preinit_array,
 * _init, .init_array. glibc 2.34+ calls a given init function the same way (its path for old
 * binaries), so the constructors run once either way. Linked only into executables. */
#define M3IDX_HIDDEN __attribute__((visibility("hidden")))

typedef int (*MainFunction)(int, char**, char**);
typedef void (*InitFunction)(int, char**, char**);

int m3idx_old_libc_start_main(MainFunction, int, char**, InitFunction, void (*)(void), void (*)(void),
                              void*);
__asm__(".symver m3idx_old_libc_start_main,__libc_start_main@GLIBC_2.2.5");

extern InitFunction __preinit_array_start[] M3IDX_HIDDEN;
extern InitFunction __preinit_array_end[] M3IDX_HIDDEN;
extern InitFunction __init_array_start[] M3IDX_HIDDEN;
extern InitFunction __init_array_end[] M3IDX_HIDDEN;
extern void _init(void) M3IDX_HIDDEN;

static void runConstructors(int argc, char** argv, char** envp) {
  for (InitFunction* f = __preinit_array_start; f != __preinit_array_end; ++f) (*f)(argc, argv, envp);
  _init();
  for (InitFunction* f = __init_array_start; f != __init_array_end; ++f) (*f)(argc, argv, envp);
}

M3IDX_HIDDEN int __wrap___libc_start_main(MainFunction main, int argc, char** argv, InitFunction init,
                                          void (*fini)(void), void (*rtldFini)(void), void* stackEnd) {
  return m3idx_old_libc_start_main(main, argc, argv, init ? init : runConstructors, fini, rtldFini,
                                   stackEnd);
}
