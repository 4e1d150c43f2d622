//! Every `unsafe` of the PJRT engine: the C API's structs at the layout of
//! PJRT C API 0.106 (`xla/pjrt/c/pjrt_c_api.h`), the plugin's function table,
//! and owning handles (client, loaded executable, buffer, event) that free
//! what the plugin allocated. Everything outside this module is safe code.
//!
//! Layout notes: every argument struct starts with `struct_size` and an
//! extension pointer; the plugin rejects a `struct_size` smaller than its own
//! `*_STRUCT_SIZE` (offset + size of the last field, without tail padding).
//! The `*_SIZE` constants below are those values for 0.106, confirmed by
//! asking the plugin itself (its rejection message names the size it expects).
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::EngineError;
use crate::host::{HostData, HostTensor};

// ----------------------------------------------------------- opaque handles

/// Declares each named type as an opaque C type: only ever behind a pointer
/// the plugin hands out.
macro_rules! opaque_handles {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub struct $name {
            _opaque: [u8; 0],
        }
    )*};
}

opaque_handles!(
    /// `PJRT_Error`.
    PjrtError,
    /// `PJRT_Client`.
    PjrtClient,
    /// `PJRT_Device`.
    PjrtDevice,
    /// `PJRT_DeviceDescription`.
    PjrtDeviceDescription,
    /// `PJRT_LoadedExecutable`.
    PjrtLoadedExecutable,
    /// `PJRT_Executable`.
    PjrtExecutable,
    /// `PJRT_Buffer`.
    PjrtBuffer,
    /// `PJRT_Event`.
    PjrtEvent,
);

type Ext = *mut c_void;
type Call<A> = Option<unsafe extern "C" fn(*mut A) -> *mut PjrtError>;
type VoidCall<A> = Option<unsafe extern "C" fn(*mut A)>;
/// A table entry this binding never calls (kept for the offsets).
type Unused = Option<unsafe extern "C" fn()>;

// ---------------------------------------------------------- argument structs

#[repr(C)]
struct ApiVersion {
    struct_size: usize,
    extension_start: Ext,
    major_version: c_int,
    minor_version: c_int,
}

#[repr(C)]
struct ErrorDestroyArgs {
    struct_size: usize,
    extension_start: Ext,
    error: *mut PjrtError,
}
const ERROR_DESTROY_SIZE: usize = 24;

#[repr(C)]
struct ErrorMessageArgs {
    struct_size: usize,
    extension_start: Ext,
    error: *const PjrtError,
    message: *const c_char,
    message_size: usize,
}
const ERROR_MESSAGE_SIZE: usize = 40;

#[repr(C)]
struct PluginInitializeArgs {
    struct_size: usize,
    extension_start: Ext,
}
const PLUGIN_INITIALIZE_SIZE: usize = 16;

/// `PJRT_Event_Await_Args` and `PJRT_Event_Destroy_Args` share this layout.
#[repr(C)]
struct EventArgs {
    struct_size: usize,
    extension_start: Ext,
    event: *mut PjrtEvent,
}
const EVENT_ARGS_SIZE: usize = 24;

#[repr(C)]
struct ClientCreateArgs {
    struct_size: usize,
    extension_start: Ext,
    create_options: *const c_void,
    num_options: usize,
    kv_get_callback: *mut c_void,
    kv_get_user_arg: *mut c_void,
    kv_put_callback: *mut c_void,
    kv_put_user_arg: *mut c_void,
    client: *mut PjrtClient,
    kv_try_get_callback: *mut c_void,
    kv_try_get_user_arg: *mut c_void,
}
/// The size the crates.io `pjrt` 0.2 binding got wrong (it sent 72).
const CLIENT_CREATE_SIZE: usize = 88;

/// `PJRT_Client_Destroy_Args`.
#[repr(C)]
struct ClientArgs {
    struct_size: usize,
    extension_start: Ext,
    client: *mut PjrtClient,
}
const CLIENT_DESTROY_SIZE: usize = 24;

/// `PJRT_Client_PlatformName_Args` / `PJRT_Client_PlatformVersion_Args`.
#[repr(C)]
struct ClientStringArgs {
    struct_size: usize,
    extension_start: Ext,
    client: *mut PjrtClient,
    text: *const c_char,
    text_size: usize,
}
const CLIENT_STRING_SIZE: usize = 40;

/// `PJRT_Client_AddressableDevices_Args` and
/// `PJRT_LoadedExecutable_AddressableDevices_Args` (owner pointer first).
#[repr(C)]
struct DeviceListArgs<O> {
    struct_size: usize,
    extension_start: Ext,
    owner: *mut O,
    devices: *const *mut PjrtDevice,
    num_devices: usize,
}
const DEVICE_LIST_SIZE: usize = 40;

#[repr(C)]
struct DeviceGetDescriptionArgs {
    struct_size: usize,
    extension_start: Ext,
    device: *mut PjrtDevice,
    description: *mut PjrtDeviceDescription,
}
const DEVICE_GET_DESCRIPTION_SIZE: usize = 32;

#[repr(C)]
struct DescriptionIdArgs {
    struct_size: usize,
    extension_start: Ext,
    description: *mut PjrtDeviceDescription,
    id: c_int,
}
const DESCRIPTION_ID_SIZE: usize = 28;

/// `PJRT_DeviceDescription_Kind_Args` / `_ToString_Args`.
#[repr(C)]
struct DescriptionStringArgs {
    struct_size: usize,
    extension_start: Ext,
    description: *mut PjrtDeviceDescription,
    text: *const c_char,
    text_size: usize,
}
const DESCRIPTION_STRING_SIZE: usize = 40;

#[repr(C)]
struct Program {
    struct_size: usize,
    extension_start: Ext,
    code: *const c_char,
    code_size: usize,
    format: *const c_char,
    format_size: usize,
}
const PROGRAM_SIZE: usize = 48;

#[repr(C)]
struct ClientCompileArgs {
    struct_size: usize,
    extension_start: Ext,
    client: *mut PjrtClient,
    program: *const Program,
    compile_options: *const c_char,
    compile_options_size: usize,
    executable: *mut PjrtLoadedExecutable,
}
const CLIENT_COMPILE_SIZE: usize = 56;

#[repr(C)]
struct BufferFromHostArgs {
    struct_size: usize,
    extension_start: Ext,
    client: *mut PjrtClient,
    data: *const c_void,
    element_type: c_int,
    dims: *const i64,
    num_dims: usize,
    byte_strides: *const i64,
    num_byte_strides: usize,
    host_buffer_semantics: c_int,
    device: *mut PjrtDevice,
    memory: *mut c_void,
    device_layout: *mut c_void,
    done_with_host_buffer: *mut PjrtEvent,
    buffer: *mut PjrtBuffer,
}
const BUFFER_FROM_HOST_SIZE: usize = 120;

/// `PJRT_HostBufferSemantics_kImmutableOnlyDuringCall`: the plugin copies
/// the host data before the call returns, so the Vec may go right after.
const HOST_SEMANTICS_IMMUTABLE_ONLY_DURING_CALL: c_int = 0;

/// `PJRT_LoadedExecutable_Destroy_Args`.
#[repr(C)]
struct LoadedExecutableArgs {
    struct_size: usize,
    extension_start: Ext,
    executable: *mut PjrtLoadedExecutable,
}
const LOADED_EXECUTABLE_DESTROY_SIZE: usize = 24;

#[repr(C)]
struct GetExecutableArgs {
    struct_size: usize,
    extension_start: Ext,
    loaded: *mut PjrtLoadedExecutable,
    executable: *mut PjrtExecutable,
}
const GET_EXECUTABLE_SIZE: usize = 32;

/// `PJRT_Executable_Destroy_Args`.
#[repr(C)]
struct ExecutableArgs {
    struct_size: usize,
    extension_start: Ext,
    executable: *mut PjrtExecutable,
}
const EXECUTABLE_DESTROY_SIZE: usize = 24;

#[repr(C)]
struct NumOutputsArgs {
    struct_size: usize,
    extension_start: Ext,
    executable: *mut PjrtExecutable,
    num_outputs: usize,
}
const NUM_OUTPUTS_SIZE: usize = 32;

#[repr(C)]
struct ExecuteOptions {
    struct_size: usize,
    extension_start: Ext,
    send_callbacks: *mut c_void,
    recv_callbacks: *mut c_void,
    num_send_ops: usize,
    num_recv_ops: usize,
    launch_id: c_int,
    non_donatable_input_indices: *const i64,
    num_non_donatable_input_indices: usize,
    context: *mut c_void,
    call_location: *const c_char,
    num_tasks: usize,
    task_ids: *mut c_int,
    incarnation_ids: *mut i64,
}
const EXECUTE_OPTIONS_SIZE: usize = 112;

#[repr(C)]
struct ExecuteArgs {
    struct_size: usize,
    extension_start: Ext,
    executable: *mut PjrtLoadedExecutable,
    options: *mut ExecuteOptions,
    argument_lists: *const *const *mut PjrtBuffer,
    num_devices: usize,
    num_args: usize,
    output_lists: *const *mut *mut PjrtBuffer,
    device_complete_events: *mut *mut PjrtEvent,
    execute_device: *mut PjrtDevice,
}
const EXECUTE_SIZE: usize = 80;

/// `PJRT_Buffer_Destroy_Args`.
#[repr(C)]
struct BufferArgs {
    struct_size: usize,
    extension_start: Ext,
    buffer: *mut PjrtBuffer,
}
const BUFFER_DESTROY_SIZE: usize = 24;

#[repr(C)]
struct BufferElementTypeArgs {
    struct_size: usize,
    extension_start: Ext,
    buffer: *mut PjrtBuffer,
    element_type: c_int,
}
const BUFFER_ELEMENT_TYPE_SIZE: usize = 28;

#[repr(C)]
struct BufferDimensionsArgs {
    struct_size: usize,
    extension_start: Ext,
    buffer: *mut PjrtBuffer,
    dims: *const i64,
    num_dims: usize,
}
const BUFFER_DIMENSIONS_SIZE: usize = 40;

#[repr(C)]
struct BufferToHostArgs {
    struct_size: usize,
    extension_start: Ext,
    src: *mut PjrtBuffer,
    host_layout: *mut c_void,
    dst: *mut c_void,
    dst_size: usize,
    event: *mut PjrtEvent,
}
const BUFFER_TO_HOST_SIZE: usize = 56;

// `PJRT_Buffer_Type` values used here.
const BUFFER_TYPE_PRED: c_int = 1;
const BUFFER_TYPE_S8: c_int = 2;
const BUFFER_TYPE_S32: c_int = 4;
const BUFFER_TYPE_S64: c_int = 5;
const BUFFER_TYPE_U8: c_int = 6;
const BUFFER_TYPE_U32: c_int = 8;
const BUFFER_TYPE_F32: c_int = 11;
const BUFFER_TYPE_BF16: c_int = 13;

// Each declared layout is at least the size the plugin checks for (Rust adds
// the same tail padding a C compiler would, so `>=` is the right test).
const _: () = {
    use std::mem::size_of;
    assert!(size_of::<ApiVersion>() == 24);
    assert!(size_of::<ErrorDestroyArgs>() == ERROR_DESTROY_SIZE);
    assert!(size_of::<ErrorMessageArgs>() == ERROR_MESSAGE_SIZE);
    assert!(size_of::<PluginInitializeArgs>() == PLUGIN_INITIALIZE_SIZE);
    assert!(size_of::<EventArgs>() == EVENT_ARGS_SIZE);
    assert!(size_of::<ClientCreateArgs>() == CLIENT_CREATE_SIZE);
    assert!(size_of::<ClientArgs>() == CLIENT_DESTROY_SIZE);
    assert!(size_of::<ClientStringArgs>() == CLIENT_STRING_SIZE);
    assert!(size_of::<DeviceListArgs<PjrtClient>>() == DEVICE_LIST_SIZE);
    assert!(size_of::<DeviceGetDescriptionArgs>() == DEVICE_GET_DESCRIPTION_SIZE);
    assert!(size_of::<DescriptionIdArgs>() == 32 && DESCRIPTION_ID_SIZE == 28);
    assert!(size_of::<DescriptionStringArgs>() == DESCRIPTION_STRING_SIZE);
    assert!(size_of::<Program>() == PROGRAM_SIZE);
    assert!(size_of::<ClientCompileArgs>() == CLIENT_COMPILE_SIZE);
    assert!(size_of::<BufferFromHostArgs>() == BUFFER_FROM_HOST_SIZE);
    assert!(size_of::<LoadedExecutableArgs>() == LOADED_EXECUTABLE_DESTROY_SIZE);
    assert!(size_of::<GetExecutableArgs>() == GET_EXECUTABLE_SIZE);
    assert!(size_of::<ExecutableArgs>() == EXECUTABLE_DESTROY_SIZE);
    assert!(size_of::<NumOutputsArgs>() == NUM_OUTPUTS_SIZE);
    assert!(size_of::<ExecuteOptions>() == EXECUTE_OPTIONS_SIZE);
    assert!(size_of::<ExecuteArgs>() == EXECUTE_SIZE);
    assert!(size_of::<BufferArgs>() == BUFFER_DESTROY_SIZE);
    assert!(size_of::<BufferElementTypeArgs>() == 32 && BUFFER_ELEMENT_TYPE_SIZE == 28);
    assert!(size_of::<BufferDimensionsArgs>() == BUFFER_DIMENSIONS_SIZE);
    assert!(size_of::<BufferToHostArgs>() == BUFFER_TO_HOST_SIZE);
    assert!(size_of::<ApiTable>() == API_TABLE_PREFIX_SIZE);
};

// ------------------------------------------------------------ function table

/// The leading part of `PJRT_Api` this binding reads: everything up to
/// `PJRT_Buffer_ToHostBuffer` (71 entries). The plugin's table is longer
/// (0.106: 136 entries, `struct_size` 1128); entries are only appended.
#[repr(C)]
struct ApiTable {
    struct_size: usize,
    extension_start: Ext,
    version: ApiVersion,
    error_destroy: VoidCall<ErrorDestroyArgs>,
    error_message: VoidCall<ErrorMessageArgs>,
    _error_get_code: Unused,
    plugin_initialize: Call<PluginInitializeArgs>,
    _plugin_attributes: Unused,
    event_destroy: Call<EventArgs>,
    _event_is_ready: Unused,
    _event_error: Unused,
    event_await: Call<EventArgs>,
    _event_on_ready: Unused,
    client_create: Call<ClientCreateArgs>,
    client_destroy: Call<ClientArgs>,
    client_platform_name: Call<ClientStringArgs>,
    _client_process_index: Unused,
    client_platform_version: Call<ClientStringArgs>,
    _client_devices: Unused,
    client_addressable_devices: Call<DeviceListArgs<PjrtClient>>,
    _client_lookup_device: Unused,
    _client_lookup_addressable_device: Unused,
    _client_addressable_memories: Unused,
    client_compile: Call<ClientCompileArgs>,
    _client_default_device_assignment: Unused,
    client_buffer_from_host_buffer: Call<BufferFromHostArgs>,
    description_id: Call<DescriptionIdArgs>,
    _description_process_index: Unused,
    _description_attributes: Unused,
    description_kind: Call<DescriptionStringArgs>,
    _description_debug_string: Unused,
    description_to_string: Call<DescriptionStringArgs>,
    device_get_description: Call<DeviceGetDescriptionArgs>,
    _device_is_addressable: Unused,
    _device_local_hardware_id: Unused,
    _device_addressable_memories: Unused,
    _device_default_memory: Unused,
    _device_memory_stats: Unused,
    _memory_id: Unused,
    _memory_kind: Unused,
    _memory_debug_string: Unused,
    _memory_to_string: Unused,
    _memory_addressable_by_devices: Unused,
    executable_destroy: Call<ExecutableArgs>,
    _executable_name: Unused,
    _executable_num_replicas: Unused,
    _executable_num_partitions: Unused,
    executable_num_outputs: Call<NumOutputsArgs>,
    _executable_size_of_generated_code: Unused,
    _executable_get_cost_analysis: Unused,
    _executable_output_memory_kinds: Unused,
    _executable_optimized_program: Unused,
    _executable_serialize: Unused,
    loaded_executable_destroy: Call<LoadedExecutableArgs>,
    loaded_executable_get_executable: Call<GetExecutableArgs>,
    loaded_executable_addressable_devices: Call<DeviceListArgs<PjrtLoadedExecutable>>,
    _loaded_executable_delete: Unused,
    _loaded_executable_is_deleted: Unused,
    loaded_executable_execute: Call<ExecuteArgs>,
    _executable_deserialize_and_load: Unused,
    _loaded_executable_fingerprint: Unused,
    buffer_destroy: Call<BufferArgs>,
    buffer_element_type: Call<BufferElementTypeArgs>,
    buffer_dimensions: Call<BufferDimensionsArgs>,
    _buffer_unpadded_dimensions: Unused,
    _buffer_dynamic_dimension_indices: Unused,
    _buffer_get_memory_layout: Unused,
    _buffer_on_device_size_in_bytes: Unused,
    _buffer_device: Unused,
    _buffer_memory: Unused,
    _buffer_delete: Unused,
    _buffer_is_deleted: Unused,
    _buffer_copy_to_device: Unused,
    buffer_to_host_buffer: Call<BufferToHostArgs>,
}
const API_TABLE_PREFIX_SIZE: usize = 40 + 71 * 8;

// ------------------------------------------------------------------- loading

/// A loaded plugin: the library (never unloaded: XLA starts threads that
/// outlive any handle) and its function table.
pub struct Api {
    _library: libloading::Library,
    table: *const ApiTable,
    pub path: PathBuf,
    pub major: i32,
    pub minor: i32,
}

// SAFETY: the table is immutable process-lifetime data of the plugin, and the
// PJRT C API's functions are callable from any thread (its clients,
// executables and buffers are thread-safe objects in XLA's implementation).
unsafe impl Send for Api {}
// SAFETY: as for Send; `Api` holds no interior mutability of its own.
unsafe impl Sync for Api {}

/// Plugins already loaded in this process, by canonical path: a plugin is
/// initialised once and its library stays mapped.
fn loaded_plugins() -> &'static Mutex<HashMap<PathBuf, Arc<Api>>> {
    static PLUGINS: OnceLock<Mutex<HashMap<PathBuf, Arc<Api>>>> = OnceLock::new();
    PLUGINS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// dlopen `path`, fetch `GetPjrtApi`, check the version with `check_version`
/// (given major, minor) and run `PJRT_Plugin_Initialize` once per process.
pub fn load_api(
    path: &Path,
    check_version: impl Fn(i32, i32) -> Result<(), EngineError>,
) -> Result<Arc<Api>, EngineError> {
    let canonical = path
        .canonicalize()
        .map_err(|e| EngineError(format!("PJRT plugin {}: {e}", path.display())))?;
    let mut plugins = loaded_plugins()
        .lock()
        .map_err(|_| EngineError("PJRT plugin registry poisoned by a panic".into()))?;
    if let Some(api) = plugins.get(&canonical) {
        return Ok(api.clone());
    }
    // SAFETY: loading a shared library runs its initialisers; the PJRT plugin
    // is a self-contained library meant to be dlopen'ed by frameworks.
    let library = unsafe { libloading::Library::new(&canonical) }.map_err(|e| {
        EngineError(format!(
            "cannot load the PJRT plugin {}: {e}",
            canonical.display()
        ))
    })?;
    // SAFETY: `GetPjrtApi` is declared in the PJRT C API as
    // `const PJRT_Api* GetPjrtApi(void)`.
    let get_api: libloading::Symbol<unsafe extern "C" fn() -> *const ApiTable> =
        unsafe { library.get(b"GetPjrtApi\0") }.map_err(|e| {
            EngineError(format!(
                "{} is not a PJRT plugin (no GetPjrtApi symbol): {e}",
                canonical.display()
            ))
        })?;
    // SAFETY: calling the plugin's entry point as declared above.
    let table = unsafe { get_api() };
    if table.is_null() {
        return Err(EngineError(format!(
            "PJRT plugin {}: GetPjrtApi returned null",
            canonical.display()
        )));
    }
    // SAFETY: `table` is non-null and points at the plugin's PJRT_Api, whose
    // first fields (struct_size, extension_start, version) exist in every
    // version of the C API.
    let (table_size, major, minor) = unsafe {
        (
            (*table).struct_size,
            (*table).version.major_version,
            (*table).version.minor_version,
        )
    };
    check_version(major, minor)?;
    if table_size < API_TABLE_PREFIX_SIZE {
        return Err(EngineError(format!(
            "PJRT plugin {}: its function table has {table_size} bytes, this binding reads {API_TABLE_PREFIX_SIZE}",
            canonical.display()
        )));
    }
    let api = Api {
        _library: library,
        table,
        path: canonical.clone(),
        major,
        minor,
    };
    if let Some(init) = api.t().plugin_initialize {
        let mut args = PluginInitializeArgs {
            struct_size: PLUGIN_INITIALIZE_SIZE,
            extension_start: ptr::null_mut(),
        };
        // SAFETY: valid args struct of the declared layout, alive for the call.
        let err = unsafe { init(&mut args) };
        api.check(err, "PJRT_Plugin_Initialize")?;
    }
    let api = Arc::new(api);
    plugins.insert(canonical, api.clone());
    Ok(api)
}

fn missing(name: &str) -> EngineError {
    EngineError(format!("the PJRT plugin does not implement {name}"))
}

/// Copy a (pointer, length) string the plugin owns.
///
/// SAFETY (caller): `p` is null or points at `len` readable bytes.
unsafe fn plugin_str(p: *const c_char, len: usize) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: guaranteed by the caller.
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    String::from_utf8_lossy(bytes).into_owned()
}

impl Api {
    fn t(&self) -> &ApiTable {
        // SAFETY: `table` was checked non-null and at least
        // API_TABLE_PREFIX_SIZE bytes long in `load_api`; the plugin keeps it
        // alive while the library is mapped (forever here).
        unsafe { &*self.table }
    }

    /// Turn a returned `PJRT_Error*` into an EngineError carrying the plugin's
    /// message (`what: message`), destroying the error.
    fn check(&self, err: *mut PjrtError, what: &str) -> Result<(), EngineError> {
        if err.is_null() {
            return Ok(());
        }
        let mut message = String::from("(the plugin gave no message)");
        if let Some(msg_fn) = self.t().error_message {
            let mut args = ErrorMessageArgs {
                struct_size: ERROR_MESSAGE_SIZE,
                extension_start: ptr::null_mut(),
                error: err,
                message: ptr::null(),
                message_size: 0,
            };
            // SAFETY: `err` is a live error from the plugin; the message has the
            // lifetime of `err`, and is copied before the error is destroyed.
            unsafe {
                msg_fn(&mut args);
                message = plugin_str(args.message, args.message_size);
            }
        }
        if let Some(destroy) = self.t().error_destroy {
            let mut args = ErrorDestroyArgs {
                struct_size: ERROR_DESTROY_SIZE,
                extension_start: ptr::null_mut(),
                error: err,
            };
            // SAFETY: `err` is live and owned by us; destroyed exactly once.
            unsafe { destroy(&mut args) };
        }
        Err(EngineError(format!("{what}: {message}")))
    }

    /// Await `event` (if any), then destroy it; the event's error is returned.
    fn await_event(&self, event: *mut PjrtEvent, what: &str) -> Result<(), EngineError> {
        if event.is_null() {
            return Ok(());
        }
        let awaited = match self.t().event_await {
            Some(f) => {
                let mut args = EventArgs {
                    struct_size: EVENT_ARGS_SIZE,
                    extension_start: ptr::null_mut(),
                    event,
                };
                // SAFETY: `event` is a live event returned by the plugin.
                let err = unsafe { f(&mut args) };
                self.check(err, what)
            }
            None => Err(missing("PJRT_Event_Await")),
        };
        self.destroy_event(event);
        awaited
    }

    fn destroy_event(&self, event: *mut PjrtEvent) {
        if let (Some(f), false) = (self.t().event_destroy, event.is_null()) {
            let mut args = EventArgs {
                struct_size: EVENT_ARGS_SIZE,
                extension_start: ptr::null_mut(),
                event,
            };
            // SAFETY: `event` is live and owned by us; destroyed exactly once.
            let err = unsafe { f(&mut args) };
            // A failure to free has no one to report to.
            let _ = self.check(err, "PJRT_Event_Destroy");
        }
    }

    fn destroy_buffer(&self, buffer: *mut PjrtBuffer) {
        if let (Some(f), false) = (self.t().buffer_destroy, buffer.is_null()) {
            let mut args = BufferArgs {
                struct_size: BUFFER_DESTROY_SIZE,
                extension_start: ptr::null_mut(),
                buffer,
            };
            // SAFETY: `buffer` is live and owned by us; destroyed exactly once.
            let err = unsafe { f(&mut args) };
            let _ = self.check(err, "PJRT_Buffer_Destroy");
        }
    }
}

// -------------------------------------------------------------------- client

/// What a device says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub id: i32,
    /// e.g. `cpu`, or a GPU's model name.
    pub kind: String,
    /// e.g. `CpuDevice(id=0)`.
    pub description: String,
}

/// An owned `PJRT_Client`, destroyed on drop.
pub struct RawClient {
    api: Arc<Api>,
    ptr: *mut PjrtClient,
}

// SAFETY: a PJRT client is a thread-safe object (see `Api`); the pointer is
// only freed in Drop, when no other reference exists.
unsafe impl Send for RawClient {}
// SAFETY: as for Send.
unsafe impl Sync for RawClient {}

impl Drop for RawClient {
    fn drop(&mut self) {
        if let Some(f) = self.api.t().client_destroy {
            let mut args = ClientArgs {
                struct_size: CLIENT_DESTROY_SIZE,
                extension_start: ptr::null_mut(),
                client: self.ptr,
            };
            // SAFETY: the client is live; executables hold an Arc to this
            // RawClient, so none outlives it.
            let err = unsafe { f(&mut args) };
            let _ = self.api.check(err, "PJRT_Client_Destroy");
        }
    }
}

impl RawClient {
    /// `PJRT_Client_Create` with no options and no key-value store.
    pub fn create(api: Arc<Api>) -> Result<RawClient, EngineError> {
        let f = api
            .t()
            .client_create
            .ok_or_else(|| missing("PJRT_Client_Create"))?;
        let mut args = ClientCreateArgs {
            struct_size: CLIENT_CREATE_SIZE,
            extension_start: ptr::null_mut(),
            create_options: ptr::null(),
            num_options: 0,
            kv_get_callback: ptr::null_mut(),
            kv_get_user_arg: ptr::null_mut(),
            kv_put_callback: ptr::null_mut(),
            kv_put_user_arg: ptr::null_mut(),
            client: ptr::null_mut(),
            kv_try_get_callback: ptr::null_mut(),
            kv_try_get_user_arg: ptr::null_mut(),
        };
        // SAFETY: valid args of the 0.106 layout; no options, no callbacks.
        let err = unsafe { f(&mut args) };
        api.check(err, "PJRT_Client_Create")?;
        if args.client.is_null() {
            return Err(EngineError("PJRT_Client_Create returned no client".into()));
        }
        Ok(RawClient {
            api,
            ptr: args.client,
        })
    }

    fn client_string(&self, f: Call<ClientStringArgs>, what: &str) -> Result<String, EngineError> {
        let f = f.ok_or_else(|| missing(what))?;
        let mut args = ClientStringArgs {
            struct_size: CLIENT_STRING_SIZE,
            extension_start: ptr::null_mut(),
            client: self.ptr,
            text: ptr::null(),
            text_size: 0,
        };
        // SAFETY: live client; the returned string is owned by the client and
        // copied at once.
        unsafe {
            let err = f(&mut args);
            self.api.check(err, what)?;
            Ok(plugin_str(args.text, args.text_size))
        }
    }

    pub fn platform_name(&self) -> Result<String, EngineError> {
        self.client_string(
            self.api.t().client_platform_name,
            "PJRT_Client_PlatformName",
        )
    }

    pub fn platform_version(&self) -> Result<String, EngineError> {
        self.client_string(
            self.api.t().client_platform_version,
            "PJRT_Client_PlatformVersion",
        )
    }

    fn addressable_device_ptrs(&self) -> Result<Vec<*mut PjrtDevice>, EngineError> {
        let f = self
            .api
            .t()
            .client_addressable_devices
            .ok_or_else(|| missing("PJRT_Client_AddressableDevices"))?;
        let mut args = DeviceListArgs {
            struct_size: DEVICE_LIST_SIZE,
            extension_start: ptr::null_mut(),
            owner: self.ptr,
            devices: ptr::null(),
            num_devices: 0,
        };
        // SAFETY: live client; the device array is owned by the client and
        // copied at once.
        unsafe {
            let err = f(&mut args);
            self.api.check(err, "PJRT_Client_AddressableDevices")?;
            Ok(copy_ptr_array(args.devices, args.num_devices))
        }
    }

    /// The devices this client can run on, in the client's order.
    pub fn devices(&self) -> Result<Vec<DeviceInfo>, EngineError> {
        self.addressable_device_ptrs()?
            .into_iter()
            .map(|d| self.device_info(d))
            .collect()
    }

    fn device_info(&self, device: *mut PjrtDevice) -> Result<DeviceInfo, EngineError> {
        let t = self.api.t();
        let get = t
            .device_get_description
            .ok_or_else(|| missing("PJRT_Device_GetDescription"))?;
        let mut dargs = DeviceGetDescriptionArgs {
            struct_size: DEVICE_GET_DESCRIPTION_SIZE,
            extension_start: ptr::null_mut(),
            device,
            description: ptr::null_mut(),
        };
        // SAFETY: `device` comes from this live client's device list.
        let err = unsafe { get(&mut dargs) };
        self.api.check(err, "PJRT_Device_GetDescription")?;
        let desc = dargs.description;
        let id_fn = t
            .description_id
            .ok_or_else(|| missing("PJRT_DeviceDescription_Id"))?;
        let mut id_args = DescriptionIdArgs {
            struct_size: DESCRIPTION_ID_SIZE,
            extension_start: ptr::null_mut(),
            description: desc,
            id: -1,
        };
        // SAFETY: `desc` is owned by the live device.
        let err = unsafe { id_fn(&mut id_args) };
        self.api.check(err, "PJRT_DeviceDescription_Id")?;
        let kind =
            self.description_string(desc, t.description_kind, "PJRT_DeviceDescription_Kind")?;
        let description = self.description_string(
            desc,
            t.description_to_string,
            "PJRT_DeviceDescription_ToString",
        )?;
        Ok(DeviceInfo {
            id: id_args.id,
            kind,
            description,
        })
    }

    fn description_string(
        &self,
        desc: *mut PjrtDeviceDescription,
        f: Call<DescriptionStringArgs>,
        what: &str,
    ) -> Result<String, EngineError> {
        let f = f.ok_or_else(|| missing(what))?;
        let mut args = DescriptionStringArgs {
            struct_size: DESCRIPTION_STRING_SIZE,
            extension_start: ptr::null_mut(),
            description: desc,
            text: ptr::null(),
            text_size: 0,
        };
        // SAFETY: `desc` is owned by a live device; the string is copied at once.
        unsafe {
            let err = f(&mut args);
            self.api.check(err, what)?;
            Ok(plugin_str(args.text, args.text_size))
        }
    }

    /// `PJRT_Client_Compile` of `code` in program format `format` with a
    /// serialized `CompileOptionsProto`.
    pub fn compile(
        self: &Arc<Self>,
        code: &[u8],
        format: &str,
        compile_options: &[u8],
    ) -> Result<RawExecutable, EngineError> {
        let f = self
            .api
            .t()
            .client_compile
            .ok_or_else(|| missing("PJRT_Client_Compile"))?;
        let program = Program {
            struct_size: PROGRAM_SIZE,
            extension_start: ptr::null_mut(),
            code: code.as_ptr() as *const c_char,
            code_size: code.len(),
            format: format.as_ptr() as *const c_char,
            format_size: format.len(),
        };
        let mut args = ClientCompileArgs {
            struct_size: CLIENT_COMPILE_SIZE,
            extension_start: ptr::null_mut(),
            client: self.ptr,
            program: &program,
            compile_options: compile_options.as_ptr() as *const c_char,
            compile_options_size: compile_options.len(),
            executable: ptr::null_mut(),
        };
        // SAFETY: live client; `program`, `code`, `format` and the options
        // outlive the call, which only reads them.
        let err = unsafe { f(&mut args) };
        self.api.check(err, "PJRT_Client_Compile")?;
        if args.executable.is_null() {
            return Err(EngineError(
                "PJRT_Client_Compile returned no executable".into(),
            ));
        }
        let exe = RawExecutable {
            client: self.clone(),
            ptr: args.executable,
            devices: Vec::new(),
            num_outputs: 0,
        };
        exe.finish()
    }
}

/// Copy a plugin-owned array of pointers.
///
/// SAFETY (caller): `p` is null or points at `n` readable pointers.
unsafe fn copy_ptr_array<T>(p: *const *mut T, n: usize) -> Vec<*mut T> {
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
}

// ---------------------------------------------------------------- executable

/// An owned `PJRT_LoadedExecutable`, destroyed on drop; keeps its client alive.
pub struct RawExecutable {
    client: Arc<RawClient>,
    ptr: *mut PjrtLoadedExecutable,
    /// The devices it runs on, one per replica, in replica order.
    devices: Vec<*mut PjrtDevice>,
    num_outputs: usize,
}

// SAFETY: a loaded executable is thread-safe in PJRT (concurrent Execute calls
// are allowed); device pointers are owned by the client this struct keeps
// alive.
unsafe impl Send for RawExecutable {}
// SAFETY: as for Send.
unsafe impl Sync for RawExecutable {}

impl Drop for RawExecutable {
    fn drop(&mut self) {
        if let Some(f) = self.client.api.t().loaded_executable_destroy {
            let mut args = LoadedExecutableArgs {
                struct_size: LOADED_EXECUTABLE_DESTROY_SIZE,
                extension_start: ptr::null_mut(),
                executable: self.ptr,
            };
            // SAFETY: live executable owned by us; destroyed exactly once.
            let err = unsafe { f(&mut args) };
            let _ = self.client.api.check(err, "PJRT_LoadedExecutable_Destroy");
        }
    }
}

/// An owned output or input buffer, destroyed on drop.
struct OwnedBuffer<'a> {
    api: &'a Api,
    ptr: *mut PjrtBuffer,
}

impl Drop for OwnedBuffer<'_> {
    fn drop(&mut self) {
        self.api.destroy_buffer(self.ptr);
    }
}

impl RawExecutable {
    /// Read the device list and output count once after compiling.
    fn finish(mut self) -> Result<RawExecutable, EngineError> {
        let api = &self.client.api;
        let t = api.t();
        let f = t
            .loaded_executable_addressable_devices
            .ok_or_else(|| missing("PJRT_LoadedExecutable_AddressableDevices"))?;
        let mut args = DeviceListArgs {
            struct_size: DEVICE_LIST_SIZE,
            extension_start: ptr::null_mut(),
            owner: self.ptr,
            devices: ptr::null(),
            num_devices: 0,
        };
        // SAFETY: live executable; the array is owned by it and copied at once.
        unsafe {
            let err = f(&mut args);
            api.check(err, "PJRT_LoadedExecutable_AddressableDevices")?;
            self.devices = copy_ptr_array(args.devices, args.num_devices);
        }
        let get = t
            .loaded_executable_get_executable
            .ok_or_else(|| missing("PJRT_LoadedExecutable_GetExecutable"))?;
        let mut gargs = GetExecutableArgs {
            struct_size: GET_EXECUTABLE_SIZE,
            extension_start: ptr::null_mut(),
            loaded: self.ptr,
            executable: ptr::null_mut(),
        };
        // SAFETY: live executable; the returned PJRT_Executable is ours to free.
        let err = unsafe { get(&mut gargs) };
        api.check(err, "PJRT_LoadedExecutable_GetExecutable")?;
        let num_outputs = match t.executable_num_outputs {
            Some(n) => {
                let mut nargs = NumOutputsArgs {
                    struct_size: NUM_OUTPUTS_SIZE,
                    extension_start: ptr::null_mut(),
                    executable: gargs.executable,
                    num_outputs: 0,
                };
                // SAFETY: `gargs.executable` is live until destroyed below.
                let err = unsafe { n(&mut nargs) };
                api.check(err, "PJRT_Executable_NumOutputs")
                    .map(|_| nargs.num_outputs)
            }
            None => Err(missing("PJRT_Executable_NumOutputs")),
        };
        if let Some(d) = t.executable_destroy {
            let mut dargs = ExecutableArgs {
                struct_size: EXECUTABLE_DESTROY_SIZE,
                extension_start: ptr::null_mut(),
                executable: gargs.executable,
            };
            // SAFETY: destroyed exactly once, after its last use above.
            let err = unsafe { d(&mut dargs) };
            let _ = api.check(err, "PJRT_Executable_Destroy");
        }
        self.num_outputs = num_outputs?;
        Ok(self)
    }

    /// Number of devices (= replicas) the executable runs on.
    pub fn num_devices(&self) -> usize {
        self.devices.len()
    }

    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// Kind and id of the devices the replicas run on.
    pub fn device_infos(&self) -> Result<Vec<DeviceInfo>, EngineError> {
        self.devices
            .iter()
            .map(|&d| self.client.device_info(d))
            .collect()
    }

    fn upload<'a>(
        &'a self,
        t: &HostTensor,
        device: *mut PjrtDevice,
    ) -> Result<OwnedBuffer<'a>, EngineError> {
        let api = &*self.client.api;
        t.validate()?;
        let f = api
            .t()
            .client_buffer_from_host_buffer
            .ok_or_else(|| missing("PJRT_Client_BufferFromHostBuffer"))?;
        let (data, element_type): (*const c_void, c_int) = match &t.data {
            HostData::F32(v) => (v.as_ptr() as *const c_void, BUFFER_TYPE_F32),
            HostData::I32(v) => (v.as_ptr() as *const c_void, BUFFER_TYPE_S32),
            HostData::I64(v) => (v.as_ptr() as *const c_void, BUFFER_TYPE_S64),
        };
        let mut args = BufferFromHostArgs {
            struct_size: BUFFER_FROM_HOST_SIZE,
            extension_start: ptr::null_mut(),
            client: self.client.ptr,
            data,
            element_type,
            dims: t.shape.as_ptr(),
            num_dims: t.shape.len(),
            byte_strides: ptr::null(),
            num_byte_strides: 0,
            host_buffer_semantics: HOST_SEMANTICS_IMMUTABLE_ONLY_DURING_CALL,
            device,
            memory: ptr::null_mut(),
            device_layout: ptr::null_mut(),
            done_with_host_buffer: ptr::null_mut(),
            buffer: ptr::null_mut(),
        };
        // SAFETY: live client and device; `data` holds shape-product elements
        // of the declared type (checked by `validate`) and stays alive until
        // the done event below has fired.
        let err = unsafe { f(&mut args) };
        api.check(err, "PJRT_Client_BufferFromHostBuffer")?;
        let buffer = OwnedBuffer {
            api,
            ptr: args.buffer,
        };
        api.await_event(args.done_with_host_buffer, "host-to-device transfer")?;
        if buffer.ptr.is_null() {
            return Err(EngineError(
                "PJRT_Client_BufferFromHostBuffer returned no buffer".into(),
            ));
        }
        Ok(buffer)
    }

    fn download(&self, buffer: &OwnedBuffer<'_>) -> Result<HostTensor, EngineError> {
        let api = &*self.client.api;
        let t = api.t();
        let et = t
            .buffer_element_type
            .ok_or_else(|| missing("PJRT_Buffer_ElementType"))?;
        let mut eargs = BufferElementTypeArgs {
            struct_size: BUFFER_ELEMENT_TYPE_SIZE,
            extension_start: ptr::null_mut(),
            buffer: buffer.ptr,
            element_type: 0,
        };
        // SAFETY: live buffer.
        let err = unsafe { et(&mut eargs) };
        api.check(err, "PJRT_Buffer_ElementType")?;
        let dims_fn = t
            .buffer_dimensions
            .ok_or_else(|| missing("PJRT_Buffer_Dimensions"))?;
        let mut dargs = BufferDimensionsArgs {
            struct_size: BUFFER_DIMENSIONS_SIZE,
            extension_start: ptr::null_mut(),
            buffer: buffer.ptr,
            dims: ptr::null(),
            num_dims: 0,
        };
        // SAFETY: live buffer; the dims array lives as long as the buffer and
        // is copied at once.
        let shape: Vec<i64> = unsafe {
            let err = dims_fn(&mut dargs);
            api.check(err, "PJRT_Buffer_Dimensions")?;
            if dargs.num_dims == 0 || dargs.dims.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(dargs.dims, dargs.num_dims).to_vec()
            }
        };
        let n: usize = shape.iter().map(|&d| d.max(0) as usize).product();
        let data = match eargs.element_type {
            BUFFER_TYPE_F32 => HostData::F32(self.read_into(buffer, vec![0f32; n])?),
            BUFFER_TYPE_S32 | BUFFER_TYPE_U32 => {
                HostData::I32(self.read_into(buffer, vec![0i32; n])?)
            }
            BUFFER_TYPE_S64 => HostData::I64(self.read_into(buffer, vec![0i64; n])?),
            // bf16 results widen exactly to f32 (the upper half of the bits).
            BUFFER_TYPE_BF16 => HostData::F32(
                self.read_into(buffer, vec![0u16; n])?
                    .into_iter()
                    .map(|b| f32::from_bits((b as u32) << 16))
                    .collect(),
            ),
            BUFFER_TYPE_PRED | BUFFER_TYPE_U8 => HostData::I32(
                self.read_into(buffer, vec![0u8; n])?
                    .into_iter()
                    .map(|b| b as i32)
                    .collect(),
            ),
            BUFFER_TYPE_S8 => HostData::I32(
                self.read_into(buffer, vec![0i8; n])?
                    .into_iter()
                    .map(|b| b as i32)
                    .collect(),
            ),
            other => {
                return Err(EngineError(format!(
                    "PJRT output of element type {other} (PJRT_Buffer_Type) is not supported by this binding"
                )))
            }
        };
        Ok(HostTensor { shape, data })
    }

    /// Copy a buffer into `dst` (sized by the caller for the buffer's shape).
    fn read_into<T: Copy>(
        &self,
        buffer: &OwnedBuffer<'_>,
        mut dst: Vec<T>,
    ) -> Result<Vec<T>, EngineError> {
        let api = &*self.client.api;
        let f = api
            .t()
            .buffer_to_host_buffer
            .ok_or_else(|| missing("PJRT_Buffer_ToHostBuffer"))?;
        let mut args = BufferToHostArgs {
            struct_size: BUFFER_TO_HOST_SIZE,
            extension_start: ptr::null_mut(),
            src: buffer.ptr,
            host_layout: ptr::null_mut(),
            dst: dst.as_mut_ptr() as *mut c_void,
            dst_size: std::mem::size_of_val(dst.as_slice()),
            event: ptr::null_mut(),
        };
        // SAFETY: live buffer; `dst` has `dst_size` writable bytes and is not
        // touched until the copy's event has fired (awaited below).
        let err = unsafe { f(&mut args) };
        api.check(err, "PJRT_Buffer_ToHostBuffer")?;
        api.await_event(args.event, "device-to-host transfer")?;
        Ok(dst)
    }

    /// Run once on every device: `args[r]` are replica r's arguments; the
    /// result is each replica's outputs.
    pub fn execute(&self, args: &[Vec<HostTensor>]) -> Result<Vec<Vec<HostTensor>>, EngineError> {
        let api = &*self.client.api;
        let n_dev = self.devices.len();
        if args.len() != n_dev {
            return Err(EngineError(format!(
                "the executable runs on {n_dev} device(s) (replicas); got {} argument list(s)",
                args.len()
            )));
        }
        let num_args = args.first().map_or(0, |a| a.len());
        if let Some((r, a)) = args.iter().enumerate().find(|(_, a)| a.len() != num_args) {
            return Err(EngineError(format!(
                "replica {r} has {} arguments, replica 0 has {num_args}",
                a.len()
            )));
        }
        let exec = api
            .t()
            .loaded_executable_execute
            .ok_or_else(|| missing("PJRT_LoadedExecutable_Execute"))?;
        let mut inputs: Vec<Vec<OwnedBuffer<'_>>> = Vec::with_capacity(n_dev);
        for (r, list) in args.iter().enumerate() {
            let mut bufs = Vec::with_capacity(list.len());
            for (i, t) in list.iter().enumerate() {
                bufs.push(
                    self.upload(t, self.devices[r])
                        .map_err(|e| EngineError(format!("argument {i} of replica {r}: {e}")))?,
                );
            }
            inputs.push(bufs);
        }
        let input_ptrs: Vec<Vec<*mut PjrtBuffer>> = inputs
            .iter()
            .map(|l| l.iter().map(|b| b.ptr).collect())
            .collect();
        let input_lists: Vec<*const *mut PjrtBuffer> =
            input_ptrs.iter().map(|l| l.as_ptr()).collect();
        let mut output_ptrs: Vec<Vec<*mut PjrtBuffer>> =
            vec![vec![ptr::null_mut(); self.num_outputs]; n_dev];
        let output_lists: Vec<*mut *mut PjrtBuffer> =
            output_ptrs.iter_mut().map(|l| l.as_mut_ptr()).collect();
        let mut events: Vec<*mut PjrtEvent> = vec![ptr::null_mut(); n_dev];
        let mut options = ExecuteOptions {
            struct_size: EXECUTE_OPTIONS_SIZE,
            extension_start: ptr::null_mut(),
            send_callbacks: ptr::null_mut(),
            recv_callbacks: ptr::null_mut(),
            num_send_ops: 0,
            num_recv_ops: 0,
            launch_id: 0,
            non_donatable_input_indices: ptr::null(),
            num_non_donatable_input_indices: 0,
            context: ptr::null_mut(),
            call_location: ptr::null(),
            num_tasks: 0,
            task_ids: ptr::null_mut(),
            incarnation_ids: ptr::null_mut(),
        };
        let mut eargs = ExecuteArgs {
            struct_size: EXECUTE_SIZE,
            extension_start: ptr::null_mut(),
            executable: self.ptr,
            options: &mut options,
            argument_lists: input_lists.as_ptr(),
            num_devices: n_dev,
            num_args,
            output_lists: output_lists.as_ptr(),
            device_complete_events: events.as_mut_ptr(),
            execute_device: ptr::null_mut(),
        };
        // SAFETY: live executable; the argument lists are [n_dev][num_args]
        // live buffers on the executable's devices; the output lists are
        // [n_dev][num_outputs] slots and the event array has n_dev slots, all
        // owned by us and alive across the call. Nothing is donated (the
        // compiled programs carry no input/output aliasing).
        let err = unsafe { exec(&mut eargs) };
        api.check(err, "PJRT_LoadedExecutable_Execute")?;
        // Own every output and event at once so that an early return frees them.
        let outputs: Vec<Vec<OwnedBuffer<'_>>> = output_ptrs
            .iter()
            .map(|l| l.iter().map(|&p| OwnedBuffer { api, ptr: p }).collect())
            .collect();
        let mut first_err = None;
        for (r, &ev) in events.iter().enumerate() {
            if let Err(e) = api.await_event(ev, &format!("execution on replica {r}")) {
                first_err.get_or_insert(e);
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        drop(inputs);
        outputs
            .iter()
            .map(|list| {
                list.iter()
                    .enumerate()
                    .map(|(i, b)| {
                        if b.ptr.is_null() {
                            Err(EngineError(format!(
                                "PJRT returned no buffer for output {i}"
                            )))
                        } else {
                            self.download(b)
                        }
                    })
                    .collect()
            })
            .collect()
    }
}
