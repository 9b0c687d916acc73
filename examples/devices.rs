//! Lists the Vulkan devices vkasync can see: name, type, API version, queue families.
//!
//! `cargo run --example devices`

fn main() {
    match vkasync::adapters() {
        Ok(list) if list.is_empty() => eprintln!("{}", vkasync::Error::NoDevice),
        Ok(list) => {
            for a in list {
                let usable = match a.unsupported_reason() {
                    None => "usable".to_string(),
                    Some(why) => format!("not usable: {why}"),
                };
                println!("{a} [{usable}]");
                for q in &a.queue_families {
                    println!(
                        "    queue family {}: {} queue(s), compute={} graphics={} transfer={} timestamp_bits={}",
                        q.index, q.queue_count, q.compute, q.graphics, q.transfer, q.timestamp_valid_bits
                    );
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
