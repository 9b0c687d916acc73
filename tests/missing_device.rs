//! A missing loader, a missing device and a `VKASYNC_DEVICE` that matches nothing give typed
//! errors. This file is its own process with one test, so the environment it changes reaches no
//! other test.

use vkasync::{Device, Error};

#[test]
fn missing_loader_device_and_unmatched_selector_are_typed_errors() {
    // VKASYNC_DEVICE that matches nothing.
    std::env::set_var("VKASYNC_DEVICE", "definitely-not-a-gpu");
    let err = Device::new().unwrap_err();
    assert!(matches!(err, Error::NoMatchingDevice { ref selector, .. } if selector == "definitely-not-a-gpu"), "{err}");
    assert!(err.to_string().contains("VKASYNC_DEVICE"), "the message says what to do: {err}");
    std::env::set_var("VKASYNC_DEVICE", "4096");
    assert!(matches!(Device::new().unwrap_err(), Error::NoMatchingDevice { .. }));
    std::env::remove_var("VKASYNC_DEVICE");

    // No loader at that path.
    let err = Device::builder().loader_path("/nonexistent/libvulkan.so.1").build().unwrap_err();
    assert!(matches!(err, Error::NoLoader(_)), "{err}");
    assert!(err.to_string().contains("apt-get install"), "the message says what to do: {err}");

    // A loader that finds no driver.
    std::env::set_var("VK_DRIVER_FILES", "/nonexistent/icd.json");
    std::env::set_var("VK_ICD_FILENAMES", "/nonexistent/icd.json");
    let err = Device::builder().validation(false).build().unwrap_err();
    assert_eq!(err, Error::NoDevice, "{err}");
    assert!(err.to_string().contains("install a driver"));
    assert!(vkasync::adapters().map(|a| a.is_empty()).unwrap_or(true));
}
