//! The binding's struct layouts and constants against the installed
//! `ucp.h`: one list below drives both a C program (compiled with `cc`
//! against the header, printing `sizeof`/`offsetof`/values) and the Rust
//! side (`size_of`/`offset_of!`/the constants), and every line must match.
//! Skips with a message when the header or `cc` is missing.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;

use tether_ucx::ffi;

/// (key, Rust value, C expression) for every checked item.
fn items() -> Vec<(String, i128, String)> {
    let mut v: Vec<(String, i128, String)> = Vec::new();
    macro_rules! structs {
        ($($ty:ident { $($f:ident),* $(,)? })*) => {$(
            v.push((
                format!("sizeof {}", stringify!($ty)),
                size_of::<ffi::$ty>() as i128,
                format!("sizeof({})", stringify!($ty)),
            ));
            $(v.push((
                format!("offsetof {}.{}", stringify!($ty), stringify!($f)),
                offset_of!(ffi::$ty, $f) as i128,
                format!("offsetof({}, {})", stringify!($ty), stringify!($f)),
            ));)*
        )*};
    }
    macro_rules! types {
        ($($ty:ident),* $(,)?) => {$(
            v.push((
                format!("sizeof {}", stringify!($ty)),
                size_of::<ffi::$ty>() as i128,
                format!("sizeof({})", stringify!($ty)),
            ));
        )*};
    }
    macro_rules! values {
        ($($c:ident),* $(,)?) => {$(
            v.push((
                format!("value {}", stringify!($c)),
                ffi::$c as i128,
                stringify!($c).to_owned(),
            ));
        )*};
    }
    structs! {
        ucp_params_t {
            field_mask, features, request_size, request_init, request_cleanup,
            tag_sender_mask, mt_workers_shared, estimated_num_eps, estimated_num_ppn, name,
        }
        ucs_cpu_set_t { ucs_bits }
        ucp_worker_params_t {
            field_mask, thread_mode, cpu_mask, events, user_data, event_fd, flags, name,
            am_alignment, client_id,
        }
        ucp_worker_attr_t {
            field_mask, thread_mode, address_flags, address, address_length, max_am_header,
            name, max_debug_string,
        }
        ucp_err_handler_t { cb, arg }
        ucs_sock_addr_t { addr, addrlen }
        ucp_ep_params_t {
            field_mask, address, err_mode, err_handler, user_data, flags, sockaddr,
            conn_request, name, local_sockaddr,
        }
        ucp_request_param_t {
            op_attr_mask, flags, request, cb, datatype, user_data, reply_buffer, memory_type,
            recv_info, memh,
        }
        ucp_am_handler_param_t { field_mask, id, flags, cb, arg }
        ucp_am_recv_param_t { recv_attr, reply_ep }
        ucp_mem_map_params_t { field_mask, address, length, flags, prot, memory_type }
    }
    types!(
        ucs_status_t,
        ucs_status_ptr_t,
        ucs_thread_mode_t,
        ucp_err_handling_mode_t,
        ucs_memory_type_t,
        ucp_datatype_t,
        ucp_atomic_op_t,
    );
    values!(
        UCS_OK,
        UCS_INPROGRESS,
        UCS_ERR_NO_MESSAGE,
        UCS_ERR_UNREACHABLE,
        UCS_ERR_BUSY,
        UCS_ERR_CANCELED,
        UCS_ERR_CONNECTION_RESET,
        UCS_ERR_ENDPOINT_TIMEOUT,
        UCS_ERR_LAST,
        UCS_THREAD_MODE_SINGLE,
        UCS_THREAD_MODE_SERIALIZED,
        UCS_THREAD_MODE_MULTI,
        UCP_ERR_HANDLING_MODE_NONE,
        UCP_ERR_HANDLING_MODE_PEER,
        UCS_MEMORY_TYPE_HOST,
        UCP_PARAM_FIELD_FEATURES,
        UCP_PARAM_FIELD_REQUEST_SIZE,
        UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        UCP_PARAM_FIELD_ESTIMATED_NUM_EPS,
        UCP_PARAM_FIELD_NAME,
        UCP_FEATURE_TAG,
        UCP_FEATURE_RMA,
        UCP_FEATURE_AMO32,
        UCP_FEATURE_AMO64,
        UCP_FEATURE_WAKEUP,
        UCP_FEATURE_STREAM,
        UCP_FEATURE_AM,
        UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        UCP_WORKER_PARAM_FIELD_NAME,
        UCP_WORKER_ATTR_FIELD_THREAD_MODE,
        UCP_WORKER_ATTR_FIELD_ADDRESS,
        UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER,
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        UCP_EP_PARAM_FIELD_ERR_HANDLER,
        UCP_EP_PARAM_FIELD_USER_DATA,
        UCP_EP_PARAM_FIELD_FLAGS,
        UCP_EP_PARAM_FIELD_NAME,
        UCP_EP_CLOSE_FLAG_FORCE,
        UCP_OP_ATTR_FIELD_REQUEST,
        UCP_OP_ATTR_FIELD_CALLBACK,
        UCP_OP_ATTR_FIELD_USER_DATA,
        UCP_OP_ATTR_FIELD_DATATYPE,
        UCP_OP_ATTR_FIELD_FLAGS,
        UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        UCP_OP_ATTR_FIELD_RECV_INFO,
        UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
        UCP_AM_SEND_FLAG_REPLY,
        UCP_AM_SEND_FLAG_EAGER,
        UCP_AM_SEND_FLAG_RNDV,
        UCP_AM_FLAG_WHOLE_MSG,
        UCP_AM_FLAG_PERSISTENT_DATA,
        UCP_AM_RECV_ATTR_FIELD_REPLY_EP,
        UCP_AM_RECV_ATTR_FLAG_DATA,
        UCP_AM_RECV_ATTR_FLAG_RNDV,
        UCP_AM_HANDLER_PARAM_FIELD_ID,
        UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        UCP_AM_HANDLER_PARAM_FIELD_CB,
        UCP_AM_HANDLER_PARAM_FIELD_ARG,
        UCP_ENTITY_NAME_MAX,
        UCP_ATOMIC_OP_ADD,
        UCP_ATOMIC_OP_SWAP,
        UCP_ATOMIC_OP_CSWAP,
        UCP_ATOMIC_OP_AND,
        UCP_ATOMIC_OP_OR,
        UCP_ATOMIC_OP_XOR,
    );
    // Macros and the pointer-status helpers, computed in C.
    v.push((
        "value ucp_dt_make_contig(1)".into(),
        ffi::UCP_DATATYPE_BYTES as i128,
        "ucp_dt_make_contig(1)".into(),
    ));
    for (name, p) in [
        ("NULL", 0usize),
        ("-4", -4isize as usize),
        ("-100", -100isize as usize),
        ("-101", -101isize as usize),
        ("4096", 4096),
    ] {
        let ptr = p as ffi::ucs_status_ptr_t;
        let c = format!(
            "((void*)(intptr_t)({}))",
            if name == "NULL" { "0" } else { name }
        );
        v.push((
            format!("value UCS_PTR_IS_ERR({name})"),
            ffi::ucs_ptr_is_err(ptr) as i128,
            format!("UCS_PTR_IS_ERR({c})"),
        ));
        v.push((
            format!("value UCS_PTR_IS_PTR({name})"),
            ffi::ucs_ptr_is_ptr(ptr) as i128,
            format!("UCS_PTR_IS_PTR({c})"),
        ));
        v.push((
            format!("value UCS_PTR_STATUS({name})"),
            ffi::ucs_ptr_status(ptr) as i128,
            format!("UCS_PTR_STATUS({c})"),
        ));
    }
    v
}

#[test]
fn layout_matches_ucp_h() {
    let include = std::env::var("UCX_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
    if !Path::new(&include).join("ucp/api/ucp.h").exists() {
        eprintln!("skipping: {include}/ucp/api/ucp.h not found (install libucx-dev or set UCX_INCLUDE_DIR)");
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").output().is_err() {
        eprintln!("skipping: no C compiler ({cc})");
        return;
    }
    let items = items();
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <ucp/api/ucp.h>\nint main(void) {\n",
    );
    for (key, _, expr) in &items {
        c.push_str(&format!(
            "    printf(\"%s %lld\\n\", \"{key}\", (long long)({expr}));\n"
        ));
    }
    c.push_str("    return 0;\n}\n");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tether-ucx-layout");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, &c).unwrap();
    let out = Command::new(&cc)
        .arg(format!("-I{include}"))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "{cc} failed on {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().expect("run layout");
    assert!(out.status.success());
    let c_side: BTreeMap<String, i128> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, n) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), n.parse().unwrap())
        })
        .collect();
    let mut bad = Vec::new();
    for (key, rust, _) in &items {
        match c_side.get(key) {
            Some(c) if c == rust => {}
            Some(c) => bad.push(format!("{key}: ucp.h {c}, Rust {rust}")),
            None => bad.push(format!("{key}: missing from the C output")),
        }
    }
    let n = |p: &str| items.iter().filter(|(k, _, _)| k.starts_with(p)).count();
    eprintln!(
        "checked {} sizes, {} offsets, {} values against {include}/ucp/api/ucp.h",
        n("sizeof"),
        n("offsetof"),
        n("value")
    );
    assert!(
        bad.is_empty(),
        "layout differs from ucp.h:\n{}",
        bad.join("\n")
    );
}
