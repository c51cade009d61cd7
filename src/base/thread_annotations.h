#pragma once
// Clang's thread-safety annotations (-Wthread-safety): which mutex guards a member, and
// which a function needs held, stated where the compiler checks them (lint.thread_safety
// compiles the runtime with clang and the warning as an error). Other compilers ignore them.

#if defined(__clang__)
#define CHORUS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define CHORUS_THREAD_ANNOTATION(x)
#endif

#define CHORUS_CAPABILITY(name) CHORUS_THREAD_ANNOTATION(capability(name))
#define CHORUS_SCOPED_CAPABILITY CHORUS_THREAD_ANNOTATION(scoped_lockable)
#define CHORUS_GUARDED_BY(mu) CHORUS_THREAD_ANNOTATION(guarded_by(mu))
#define CHORUS_PT_GUARDED_BY(mu) CHORUS_THREAD_ANNOTATION(pt_guarded_by(mu))
#define CHORUS_REQUIRES(...) CHORUS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define CHORUS_EXCLUDES(...) CHORUS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define CHORUS_ACQUIRE(...) CHORUS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define CHORUS_RELEASE(...) CHORUS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define CHORUS_TRY_ACQUIRE(...) CHORUS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define CHORUS_ASSERT_HELD() CHORUS_THREAD_ANNOTATION(assert_capability(this))
