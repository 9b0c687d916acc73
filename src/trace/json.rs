//! The Chrome trace-event JSON writer.

#[allow(unused_imports)]
use super::*;

/// A `thread_name` metadata event (the name travels in `name`, see `write_event`).
pub(super) fn meta(pid: u8, tid: u32, name: String) -> Event {
    Event { ph: b'M', pid, tid, name: Name::Owned(name.into()), cat: "", ts: 0, dur: 0, id: 0, args: Args::new() }
}

pub(super) fn write_str(out: &mut impl Write, s: &str) -> std::io::Result<()> {
    out.write_all(b"\"")?;
    for c in s.chars() {
        match c {
            '"' => out.write_all(b"\\\"")?,
            '\\' => out.write_all(b"\\\\")?,
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32)?,
            c => write!(out, "{c}")?,
        }
    }
    out.write_all(b"\"")
}

/// Nanoseconds as the format's microseconds, exactly.
pub(super) fn micros(out: &mut impl Write, ns: i64) -> std::io::Result<()> {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    write!(out, "{sign}{}.{:03}", a / 1000, a % 1000)
}

pub(super) fn write_event(out: &mut impl Write, e: &Event, name: &str) -> std::io::Result<()> {
    if e.ph == b'M' {
        write!(
            out,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
            e.pid, e.tid
        )?;
        write_str(out, name)?;
        return out.write_all(b"}}");
    }
    out.write_all(b"{\"name\":")?;
    write_str(out, name)?;
    write!(out, ",\"ph\":\"{}\",\"pid\":{},\"tid\":{},\"cat\":\"{}\",\"ts\":", e.ph as char, e.pid, e.tid, e.cat)?;
    micros(out, e.ts)?;
    match e.ph {
        b'X' => {
            out.write_all(b",\"dur\":")?;
            micros(out, e.dur.max(0))?;
        }
        b'b' | b'e' => write!(out, ",\"id\":\"0x{:x}\"", e.id)?,
        b'i' => out.write_all(b",\"s\":\"t\"")?,
        _ => {}
    }
    if !e.args.is_empty() {
        out.write_all(b",\"args\":{")?;
        for (i, (k, v)) in e.args.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "\"{k}\":{v}")?;
        }
        out.write_all(b"}")?;
    }
    out.write_all(b"}")
}
