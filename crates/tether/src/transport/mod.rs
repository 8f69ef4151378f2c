//! Transports: how bytes move between two processes, each over links of
//! one kind, behind one contract (`api.rs`): TCP sockets (`tcp/`), shared
//! memory (`shm/`) and files in a shared directory (`file/`). They are
//! siblings: none imports another, none calls the engine or the runtime;
//! they report what happened in their `Events` (`events.rs`), and the
//! router (`crate::router`) decides which one reaches which peer, owns the
//! reactor they register in (`reactor.rs`) and hands their reports on.
//! Composites wrap them: `hybrid.rs` (a link and files), `rails.rs`
//! (several links to each peer).

pub(crate) mod api;
pub(crate) mod events;
pub mod file;
pub(crate) mod hybrid;
pub(crate) mod link_settings;
pub(crate) mod peer_table;
pub(crate) mod rails;
pub(crate) mod reactor;
pub mod resources;
pub(crate) mod retry;
pub mod shm;
pub mod tcp;
pub mod ucx;

/// Whether each transport this build has can be used in this process, and
/// why not (for `tether info`).
pub fn availability() -> Vec<(&'static str, std::result::Result<String, String>)> {
    vec![
        ("shm", shm::availability()),
        (
            "tcp",
            Ok("usable: non-blocking sockets on epoll, on loopback or TETHER_TCP_INTERFACE".into()),
        ),
        ("file", file::availability()),
        (
            "hybrid",
            Ok("usable: shm or tcp for control and small messages, files in TETHER_FILE_DIR for payloads above TETHER_HYBRID_THRESHOLD".into()),
        ),
        ("ucx", ucx_availability()),
    ]
}

/// Whether UCX loads here (`dlopen`, `crates/tether-ucx`: nothing links
/// against it) and makes a worker.
fn ucx_availability() -> std::result::Result<String, String> {
    let unusable = |why: String| format!("not usable here: {why}");
    let version = tether_ucx::Ucp::load()
        .map_err(|e| unusable(e.reason))?
        .version_string();
    let setting = crate::settings::Settings::from_env()
        .map(|(settings, _)| settings.ucx_rma().to_string())
        .unwrap_or_else(|_| "auto".into());
    let prepared = ucx::Prepared::create(&setting).map_err(unusable)?;
    let windows = match prepared.rma.peers {
        ucx::RmaPeers::All => "windows by UCX RMA",
        ucx::RmaPeers::SameHost => "windows by UCX RMA on this host",
        ucx::RmaPeers::None => "windows by frames",
    };
    Ok(format!(
        "usable: UCX {version}, frames as active messages, {windows} ({}); UCX_TLS and UCX_NET_DEVICES pick the network (docs/transports.md)",
        prepared.rma.why
    ))
}
