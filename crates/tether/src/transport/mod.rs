//! Transports: how bytes move between two processes. Only `tcp` exists in
//! this build; `TETHER_TRANSPORTS` names the order in which they are tried.

pub mod tcp;
