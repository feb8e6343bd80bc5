//! Paths of the guest components used by corral's integration tests and
//! benchmarks: well-behaved (`ECHO`, `EXAMPLE`) and malicious (`ADVERSARY`,
//! `HTTP_CLIENT`, `RAW_SOCKET`).

include!(concat!(env!("OUT_DIR"), "/programs.rs"));
