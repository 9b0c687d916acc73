//! Loading Vulkan, creating the instance (with the validation layer on request), listing the
//! physical devices and choosing one.

use crate::error::{map_oom, Error, Result};
use ash::vk;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The kind of a physical device, in vkasync's default order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceType {
    /// A discrete GPU (preferred by default).
    Discrete,
    /// A GPU integrated with the host processor.
    Integrated,
    /// A virtual GPU.
    Virtual,
    /// A device running on the host CPU, such as Mesa's lavapipe.
    Cpu,
    /// Anything else.
    Other,
}

impl DeviceType {
    fn from_vk(t: vk::PhysicalDeviceType) -> Self {
        match t {
            vk::PhysicalDeviceType::DISCRETE_GPU => Self::Discrete,
            vk::PhysicalDeviceType::INTEGRATED_GPU => Self::Integrated,
            vk::PhysicalDeviceType::VIRTUAL_GPU => Self::Virtual,
            vk::PhysicalDeviceType::CPU => Self::Cpu,
            _ => Self::Other,
        }
    }

    /// Higher is preferred by the default selection.
    fn preference(self) -> u32 {
        match self {
            Self::Discrete => 4,
            Self::Integrated => 3,
            Self::Virtual => 2,
            Self::Cpu => 1,
            Self::Other => 0,
        }
    }
}

/// One queue family of a physical device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFamilyInfo {
    /// The family's index.
    pub index: u32,
    /// How many queues it has.
    pub queue_count: u32,
    /// Whether it supports compute.
    pub compute: bool,
    /// Whether it supports graphics.
    pub graphics: bool,
    /// Whether it supports transfer (compute and graphics families always do).
    pub transfer: bool,
    /// Valid bits in timestamps written on this family (0: no timestamps).
    pub timestamp_valid_bits: u32,
}

/// A physical device as listed by [`adapters`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterInfo {
    /// Its index in the listing (what `VKASYNC_DEVICE=<index>` selects).
    pub index: usize,
    /// The driver's name for it.
    pub name: String,
    /// Its kind.
    pub device_type: DeviceType,
    /// The Vulkan version it supports, as `(major, minor, patch)`.
    pub api_version: (u32, u32, u32),
    /// Whether it offers timeline semaphores (required by vkasync).
    pub timeline_semaphores: bool,
    /// Its queue families.
    pub queue_families: Vec<QueueFamilyInfo>,
}

impl AdapterInfo {
    /// Why vkasync cannot use this device, or `None` when it can.
    pub fn unsupported_reason(&self) -> Option<String> {
        if self.api_version < (1, 2, 0) {
            let (a, b, c) = self.api_version;
            return Some(format!("Vulkan {a}.{b}.{c} (1.2 or later is needed)"));
        }
        if !self.timeline_semaphores {
            return Some("no timelineSemaphore feature".into());
        }
        if !self.queue_families.iter().any(|q| q.compute) {
            return Some("no queue family with compute".into());
        }
        None
    }
}

impl std::fmt::Display for AdapterInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b, c) = self.api_version;
        write!(f, "{}: {} ({:?}, Vulkan {a}.{b}.{c})", self.index, self.name, self.device_type)
    }
}

/// Counts of validation-layer messages, shared with the debug messenger's callback.
#[derive(Debug, Default)]
pub(crate) struct ValidationLog {
    /// Errors and warnings seen so far.
    pub count: AtomicU64,
    /// Their texts (the first 64), for test failures.
    pub messages: Mutex<Vec<String>>,
}

/// The loader, the instance and (with validation) the debug messenger.
pub(crate) struct InstanceShared {
    pub entry: ash::Entry,
    pub instance: ash::Instance,
    pub debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Kept alive for the messenger's callback; its pointer is the callback's user data.
    pub log: Arc<ValidationLog>,
    /// The validation layer is on and older than 1.3.275 (see `create_instance`).
    pub old_layer: bool,
}

/// Serialises creating and destroying instances and devices across the process. Vulkan allows
/// them on different instances at once; the Khronos validation layer keeps process-wide state,
/// and a crash inside its `vkDestroyDebugUtilsMessengerEXT` was seen with two queue drivers
/// destroying their instances together while the process exited (lavapipe, about one run in
/// twenty of `tests/queue_set.rs`; since then closing a queue joins its driver thread, so
/// nothing is destroyed while the process exits: see "Shutdown" in [`crate::executor`]).
/// These calls are rare and slow, so serialising them costs nothing that matters.
pub(crate) static LIFECYCLE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`LIFECYCLE`] (ignoring poisoning: the guarded calls leave nothing half-done of ours).
pub(crate) fn lifecycle() -> std::sync::MutexGuard<'static, ()> {
    crate::util::lock(&LIFECYCLE)
}

impl Drop for InstanceShared {
    fn drop(&mut self) {
        let _serial = lifecycle();
        // SAFETY: the device made from this instance has been destroyed (DeviceShared owns this
        // value and drops it after destroying the device); no other object of the instance lives.
        unsafe {
            if let Some((utils, messenger)) = self.debug.take() {
                utils.destroy_debug_utils_messenger(messenger, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}

/// Opens the Vulkan loader: the system's, or the library at `path`. Each loader is opened once
/// and stays loaded for the life of the process, together with one instance of its own that is
/// never destroyed. That instance keeps the drivers it found loaded: the loader opens a driver's
/// library for each instance and closes it when the instance goes, and NVIDIA's driver cannot be
/// loaded and unloaded over and over in one process (on an H200 the 30th instance made after the
/// others were destroyed found no device, whether it was for a device or for [`adapters`]).
/// The caller holds [`lifecycle`].
pub(crate) fn load_entry(path: Option<&std::path::Path>) -> Result<ash::Entry> {
    /// A loader, and the instance that pins its drivers (none where it could not be made).
    type Loaded = (Option<std::path::PathBuf>, ash::Entry, Option<ash::Instance>);
    static LOADED: Mutex<Vec<Loaded>> = Mutex::new(Vec::new());
    let mut loaded = crate::util::lock(&LOADED);
    if let Some((_, entry, _)) = loaded.iter().find(|(p, _, _)| p.as_deref() == path) {
        return Ok(entry.clone());
    }
    // SAFETY: loading libvulkan runs its initialisers; the Vulkan loader is designed to be loaded
    // this way, and the Entry kept here holds the library open until the process exits.
    let entry = unsafe {
        match path {
            Some(p) => ash::Entry::load_from(p),
            None => ash::Entry::load(),
        }
    };
    let entry = entry.map_err(|e| Error::NoLoader(e.to_string()))?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: a plain instance with no layer and no extension, from a loaded entry (the caller
    // holds `lifecycle()`, as for every instance); it is never destroyed (the process's exit
    // releases it).
    let pin = unsafe { entry.create_instance(&info, None) }.ok();
    loaded.push((path.map(std::path::Path::to_path_buf), entry.clone(), pin));
    Ok(entry)
}

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

unsafe extern "system" fn debug_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes a valid callback-data pointer for the duration of the call, and
    // `user` is the `ValidationLog` that the InstanceShared keeps alive until the messenger is
    // destroyed.
    let (message, log, from_loader) = unsafe {
        let msg = if data.is_null() || (*data).p_message.is_null() {
            String::from("(no message)")
        } else {
            CStr::from_ptr((*data).p_message).to_string_lossy().into_owned()
        };
        let id_name = if data.is_null() || (*data).p_message_id_name.is_null() {
            None
        } else {
            Some(CStr::from_ptr((*data).p_message_id_name))
        };
        let id = if data.is_null() { 0 } else { (*data).message_id_number };
        // The Vulkan loader reports through the same messenger (for example Ubuntu 22.04's
        // loader warns that a driver it found, Mesa's virtio one, cannot start): general
        // messages named "Loader Message", with no message number. They are logged, not
        // counted: only the layers' findings fail a test.
        let from_loader = id_name == Some(c"Loader Message")
            || (types == vk::DebugUtilsMessageTypeFlagsEXT::GENERAL && id == 0 && id_name.is_none());
        (msg, &*(user as *const ValidationLog), from_loader)
    };
    let counted = !from_loader
        && severity
            .intersects(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING);
    if counted {
        log.count.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut m) = log.messages.lock() {
            if m.len() < 64 {
                m.push(message.clone());
            }
        }
    }
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        log::error!(target: "vkasync::validation", "{message}");
    } else if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::WARNING) {
        log::warn!(target: "vkasync::validation", "{message}");
    } else {
        log::debug!(target: "vkasync::validation", "{message}");
    }
    vk::FALSE
}

/// Creates a Vulkan 1.2 instance; with `validation`, turns on the Khronos validation layer with
/// synchronization validation and routes its messages into `log` and the returned counter.
pub(crate) fn create_instance(validation: bool, loader: Option<&std::path::Path>) -> Result<InstanceShared> {
    let _serial = lifecycle();
    let entry = load_entry(loader)?;
    // SAFETY: plain queries on a loaded entry.
    let version = unsafe { entry.try_enumerate_instance_version() }
        .map_err(map_oom("vkEnumerateInstanceVersion"))?
        .unwrap_or(vk::API_VERSION_1_0);
    if version < vk::API_VERSION_1_2 {
        return Err(Error::Unsupported {
            device: "Vulkan loader".into(),
            missing: format!(
                "instance version {}.{} (1.2 or later is needed)",
                vk::api_version_major(version),
                vk::api_version_minor(version)
            ),
        });
    }
    let app = vk::ApplicationInfo::default()
        .application_name(c"vkasync")
        .engine_name(c"vkasync")
        .api_version(vk::API_VERSION_1_2);
    let mut layers = Vec::new();
    let mut extensions = Vec::new();
    let mut layer_version = 0;
    if validation {
        // SAFETY: plain query on a loaded entry.
        let available = unsafe { entry.enumerate_instance_layer_properties() }
            .map_err(map_oom("vkEnumerateInstanceLayerProperties"))?;
        let Some(layer) = available.iter().find(|l| l.layer_name_as_c_str().is_ok_and(|n| n == VALIDATION_LAYER))
        else {
            return Err(Error::NoValidationLayer);
        };
        layer_version = layer.spec_version;
        layers.push(VALIDATION_LAYER.as_ptr());
        extensions.push(ash::ext::debug_utils::NAME.as_ptr());
        extensions.push(ash::ext::validation_features::NAME.as_ptr());
    }
    let enables = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
    // The layer's thread-safety checks stay off on layers older than 1.3.275 (Debian 12 ships
    // 1.3.239, Ubuntu 22.04 1.3.204). Those layers crash inside their own timeline-semaphore
    // bookkeeping when one thread submits or records while another reads or waits on the
    // timeline (the class of crash of Vulkan-ValidationLayers#4968, reported against
    // 1.3.2xx layers in 2023): with an executor's driver thread submitting while its loop reads
    // the counter, `tests/executor.rs` crashed in the layer in 2 to 5 of 10 parallel runs, and
    // in none of 40 with these checks off. Everything else (core checks, synchronization
    // validation) stays on; newer layers keep the thread-safety checks too.
    let disables: &[vk::ValidationFeatureDisableEXT] = if layer_version < vk::make_api_version(0, 1, 3, 275) {
        &[vk::ValidationFeatureDisableEXT::THREAD_SAFETY]
    } else {
        &[]
    };
    let mut features = vk::ValidationFeaturesEXT::default()
        .enabled_validation_features(&enables)
        .disabled_validation_features(disables);
    let log = Arc::new(ValidationLog::default());
    let mut messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
                | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                | vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
        )
        .pfn_user_callback(Some(debug_callback))
        .user_data(Arc::as_ptr(&log) as *mut c_void);
    let mut info = vk::InstanceCreateInfo::default()
        .application_info(&app)
        .enabled_layer_names(&layers)
        .enabled_extension_names(&extensions);
    if validation {
        info = info.push_next(&mut features).push_next(&mut messenger_info);
    }
    // SAFETY: `info` and everything it points to live until the call returns.
    let instance = unsafe { entry.create_instance(&info, None) }.map_err(|e| match e {
        vk::Result::ERROR_INCOMPATIBLE_DRIVER => Error::NoDevice,
        vk::Result::ERROR_LAYER_NOT_PRESENT => Error::NoValidationLayer,
        e => map_oom("vkCreateInstance")(e),
    })?;
    let old_layer = validation && layer_version < vk::make_api_version(0, 1, 3, 275);
    let mut shared = InstanceShared { entry, instance, debug: None, log, old_layer };
    if validation {
        let utils = ash::ext::debug_utils::Instance::new(&shared.entry, &shared.instance);
        // The chained copy above got a pNext when it was pushed into the instance info.
        messenger_info.p_next = std::ptr::null();
        // SAFETY: the instance is live; the user-data pointer stays valid as long as `shared.log`.
        let messenger = unsafe { utils.create_debug_utils_messenger(&messenger_info, None) }
            .map_err(map_oom("vkCreateDebugUtilsMessengerEXT"))?;
        shared.debug = Some((utils, messenger));
    }
    Ok(shared)
}

/// Describes one physical device.
pub(crate) fn describe(instance: &ash::Instance, index: usize, pd: vk::PhysicalDevice) -> AdapterInfo {
    // SAFETY: `pd` was enumerated from `instance`, which is live.
    let props = unsafe { instance.get_physical_device_properties(pd) };
    let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
    let api = props.api_version;
    if api >= vk::API_VERSION_1_2 {
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut timeline);
        // SAFETY: as above; the chain is valid for a 1.2 device.
        unsafe { instance.get_physical_device_features2(pd, &mut f2) };
    }
    // SAFETY: as above.
    let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
    AdapterInfo {
        index,
        name: props.device_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
        device_type: DeviceType::from_vk(props.device_type),
        api_version: (vk::api_version_major(api), vk::api_version_minor(api), vk::api_version_patch(api)),
        timeline_semaphores: timeline.timeline_semaphore == vk::TRUE,
        queue_families: families
            .iter()
            .enumerate()
            .map(|(i, f)| QueueFamilyInfo {
                index: i as u32,
                queue_count: f.queue_count,
                compute: f.queue_flags.contains(vk::QueueFlags::COMPUTE),
                graphics: f.queue_flags.contains(vk::QueueFlags::GRAPHICS),
                transfer: f
                    .queue_flags
                    .intersects(vk::QueueFlags::TRANSFER | vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS),
                timestamp_valid_bits: f.timestamp_valid_bits,
            })
            .collect(),
    }
}

/// Lists the physical devices.
pub(crate) fn enumerate(instance: &ash::Instance) -> Result<Vec<(vk::PhysicalDevice, AdapterInfo)>> {
    // SAFETY: the instance is live.
    let pds = unsafe { instance.enumerate_physical_devices() }.map_err(map_oom("vkEnumeratePhysicalDevices"))?;
    Ok(pds.into_iter().enumerate().map(|(i, pd)| (pd, describe(instance, i, pd))).collect())
}

/// Lists the Vulkan devices of this machine: name, type, API version, queue families.
///
/// ```no_run
/// for adapter in vkasync::adapters()? {
///     println!("{adapter}");
/// }
/// # Ok::<(), vkasync::Error>(())
/// ```
pub fn adapters() -> Result<Vec<AdapterInfo>> {
    let shared = create_instance(false, None)?;
    Ok(enumerate(&shared.instance)?.into_iter().map(|(_, a)| a).collect())
}

/// How to choose a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSelector {
    /// The default: discrete, then integrated, then virtual, then CPU devices.
    Default,
    /// The device with this index in [`adapters`]'s listing.
    Index(usize),
    /// The first device whose name contains this text (case-insensitive).
    Name(String),
}

impl DeviceSelector {
    /// Parses `VKASYNC_DEVICE`'s syntax: an index, or part of a name.
    pub fn parse(s: &str) -> Self {
        match s.trim().parse::<usize>() {
            Ok(i) => Self::Index(i),
            Err(_) => Self::Name(s.trim().to_string()),
        }
    }

    /// Picks from the listing. Devices vkasync cannot use are skipped by the default order;
    /// an explicit choice of such a device is an [`Error::Unsupported`].
    pub(crate) fn pick<'a, P>(&self, list: &'a [(P, AdapterInfo)]) -> Result<&'a (P, AdapterInfo)> {
        if list.is_empty() {
            return Err(Error::NoDevice);
        }
        let found = match self {
            Self::Default => {
                let usable = list
                    .iter()
                    .filter(|(_, a)| a.unsupported_reason().is_none())
                    .max_by_key(|(_, a)| (a.device_type.preference(), std::cmp::Reverse(a.index)));
                match usable {
                    Some(x) => x,
                    None => {
                        let (_, a) = &list[0];
                        return Err(Error::Unsupported {
                            device: a.name.clone(),
                            missing: a.unsupported_reason().unwrap_or_default(),
                        });
                    }
                }
            }
            Self::Index(i) => list.iter().find(|(_, a)| a.index == *i).ok_or_else(|| self.no_match(list))?,
            Self::Name(n) => {
                let n = n.to_lowercase();
                list.iter().find(|(_, a)| a.name.to_lowercase().contains(&n)).ok_or_else(|| self.no_match(list))?
            }
        };
        if let Some(missing) = found.1.unsupported_reason() {
            return Err(Error::Unsupported { device: found.1.name.clone(), missing });
        }
        Ok(found)
    }

    fn no_match<P>(&self, list: &[(P, AdapterInfo)]) -> Error {
        Error::NoMatchingDevice {
            selector: match self {
                Self::Default => String::new(),
                Self::Index(i) => i.to_string(),
                Self::Name(n) => n.clone(),
            },
            available: list.iter().map(|(_, a)| format!("{}: {}", a.index, a.name)).collect::<Vec<_>>().join(", "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(index: usize, name: &str, t: DeviceType, timeline: bool, api: (u32, u32, u32)) -> ((), AdapterInfo) {
        let family = QueueFamilyInfo {
            index: 0,
            queue_count: 1,
            compute: true,
            graphics: true,
            transfer: true,
            timestamp_valid_bits: 64,
        };
        (
            (),
            AdapterInfo {
                index,
                name: name.into(),
                device_type: t,
                api_version: api,
                timeline_semaphores: timeline,
                queue_families: vec![family],
            },
        )
    }

    #[test]
    fn default_prefers_discrete_then_integrated_then_virtual_then_cpu() {
        let list = vec![
            adapter(0, "llvmpipe", DeviceType::Cpu, true, (1, 3, 0)),
            adapter(1, "virgl", DeviceType::Virtual, true, (1, 3, 0)),
            adapter(2, "iGPU", DeviceType::Integrated, true, (1, 3, 0)),
            adapter(3, "dGPU", DeviceType::Discrete, true, (1, 3, 0)),
        ];
        for n in (1..=4).rev() {
            let picked = DeviceSelector::Default.pick(&list[..n]).unwrap();
            assert_eq!(picked.1.index, n - 1);
        }
        assert_eq!(DeviceSelector::parse("2").pick(&list).unwrap().1.name, "iGPU");
        assert_eq!(DeviceSelector::parse("dgp").pick(&list).unwrap().1.name, "dGPU");
    }

    #[test]
    fn devices_without_timeline_semaphores_are_skipped_or_refused() {
        let list = vec![
            adapter(0, "old dGPU", DeviceType::Discrete, false, (1, 3, 0)),
            adapter(1, "llvmpipe", DeviceType::Cpu, true, (1, 3, 0)),
        ];
        assert_eq!(DeviceSelector::Default.pick(&list).unwrap().1.name, "llvmpipe");
        let err = DeviceSelector::parse("old").pick(&list).unwrap_err();
        assert!(
            matches!(err, Error::Unsupported { ref missing, .. } if missing.contains("timelineSemaphore")),
            "{err}"
        );
        let err = DeviceSelector::Default.pick(&list[..1]).unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        let v11 = vec![adapter(0, "v1.1", DeviceType::Discrete, true, (1, 1, 0))];
        assert!(matches!(DeviceSelector::Default.pick(&v11).unwrap_err(), Error::Unsupported { .. }));
    }

    #[test]
    fn empty_listing_is_no_device_and_misses_name_the_choices() {
        let empty: Vec<((), AdapterInfo)> = Vec::new();
        assert_eq!(DeviceSelector::Default.pick(&empty).unwrap_err(), Error::NoDevice);
        let list = vec![adapter(0, "llvmpipe", DeviceType::Cpu, true, (1, 3, 0))];
        let err = DeviceSelector::parse("7").pick(&list).unwrap_err();
        assert!(err.to_string().contains("0: llvmpipe"), "{err}");
    }
}
