//! A crash of a test process (a segmentation fault, a bus error, an illegal instruction)
//! prints the crashing thread's backtrace before the process dies, so that a rare crash in CI
//! leaves more than `signal: 11` behind.
//!
//! The handler does what a signal handler should not (it allocates, and formats a backtrace):
//! it runs only when the process is about to die anyway. So that it can never turn a crash into
//! a hang (a fault inside `malloc` holds the allocator's lock, which the backtrace then waits
//! for), it first arms an alarm whose default action ends the process. Then it puts back the
//! handler it replaced (the standard library's, which reports stack overflows) and returns: the
//! faulting instruction runs again and the process dies as it would have.
//!
//! One loss: a stack overflow now ends as a plain `SIGSEGV` without the standard library's
//! message, since this handler runs first, on the exhausted stack (the standard library's
//! alternate signal stack is too small to format a backtrace on).

#[cfg(unix)]
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (i, sig) in SIGNALS.iter().enumerate() {
            // SAFETY: `sigaction` with a zeroed structure, a valid handler and an empty mask is
            // a well-formed call; the previous action is stored once, before any handler can
            // read it (the handler reads it only after it was installed, here).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_crash as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(*sig, &action, &mut old) == 0 {
                    PREVIOUS[i] = Some(old);
                }
            }
        }
    });
}

#[cfg(not(unix))]
pub fn install() {}

#[cfg(unix)]
const SIGNALS: [libc::c_int; 3] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL];

#[cfg(unix)]
static mut PREVIOUS: [Option<libc::sigaction>; 3] = [None, None, None];

#[cfg(unix)]
extern "C" fn on_crash(sig: libc::c_int, _info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: `alarm` is async-signal-safe; its default action ends the process in 20 s if
    // what follows blocks.
    unsafe { libc::alarm(20) };
    let name = std::thread::current().name().unwrap_or("unnamed").to_string();
    let bt = std::backtrace::Backtrace::force_capture();
    // Straight to the standard error (`eprintln!` would go to the test harness's capture,
    // which a dying process never prints).
    let msg = format!("\ntest process: signal {sig} in thread '{name}'; its backtrace:\n{bt}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), msg.as_bytes());
    let i = SIGNALS.iter().position(|s| *s == sig).unwrap_or(0);
    // SAFETY: `PREVIOUS` was written once before the handler was installed and is only read
    // here; `sigaction` is async-signal-safe. With the previous action back (or the default,
    // if none was recorded), returning re-runs the faulting instruction, which ends the
    // process as it would have ended without this handler.
    unsafe {
        let previous = (*std::ptr::addr_of!(PREVIOUS))[i];
        match previous {
            Some(old) => libc::sigaction(sig, &old, std::ptr::null_mut()),
            None => {
                libc::signal(sig, libc::SIG_DFL);
                0
            }
        };
    }
}
