//! Everything one program run started, and killing all of it.
//!
//! A process group is not enough: a program that calls `setsid` (a daemon,
//! `nohup`, a test harness) leaves it, and without a `pids` cgroup (the
//! usual case for a user who is not root) nothing else holds it. So the
//! `corral` binary makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`,
//! see [`adopt_orphans`]): a process whose parent dies is re-parented to
//! corral instead of to init, and stays findable. A run's processes are
//! then its program's descendants, the members of its process group and
//! corral's children that corral did not start itself ([`HostChild`]
//! registers those), with their descendants. [`Tree`] kills them when the
//! run ends and, as a drop guard, when the run is cancelled (Ctrl-C, a
//! timeout of the call), and waits for the ones re-parented to corral so
//! that no zombie is left.
//!
//! Escaped processes cannot be told apart by the run that started them
//! (they left the group and their parent is gone): a run ends by killing
//! every escapee. The agent runs commands one at a time, so that is the
//! run's own.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::Duration;

/// Set by the binary: corral may adopt orphans (and then must reap them).
static ADOPT: AtomicBool = AtomicBool::new(false);
/// Children corral started and waits for itself (programs, helpers): never
/// taken for escapees, never waited for here.
static HOST_CHILDREN: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// Shared by a spawn from before its fork until its child is registered in
/// [`HOST_CHILDREN`], exclusive while the processes of a run are listed:
/// between its fork and its registration a child is, as far as `/proc`
/// says, a child of corral that corral did not start, and a run ending at
/// that moment killed it as an escapee (an MCP server starting while git
/// ran for the session's context lost its handshake).
static SPAWNING: RwLock<()> = RwLock::new(());

/// Held while a child is forked and registered; see [`spawning`].
pub(super) struct Spawning(
    #[expect(dead_code, reason = "held, never read")] RwLockReadGuard<'static, ()>,
);

/// Keeps every run from listing its processes until the child about to be
/// forked is registered ([`HostChild::track`]) and the guard dropped.
pub(super) fn spawning() -> Spawning {
    Spawning(SPAWNING.read().unwrap_or_else(PoisonError::into_inner))
}

/// Every process, with the children corral started itself, listed while no
/// spawn is between its fork and its registration.
fn snapshot() -> (Vec<Proc>, Vec<i32>) {
    let _listing = SPAWNING.write().unwrap_or_else(PoisonError::into_inner);
    let procs = scan();
    let host = HOST_CHILDREN.lock().map(|l| l.clone()).unwrap_or_default();
    (procs, host)
}

/// Lets the programs corral runs be followed when they leave their process
/// group: called once by the `corral` binary, which is the process running
/// the calls. Not for a library user whose process has children of its
/// own: escaped processes are killed as corral's children that it did not
/// start (see the module docs), and such a process has others.
pub fn adopt_orphans() {
    ADOPT.store(true, Ordering::Relaxed);
}

/// Whether corral is the subreaper of what it runs, making itself one at
/// the first call.
fn subreaper() -> bool {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !ADOPT.load(Ordering::Relaxed) {
        return false;
    }
    *ONCE.get_or_init(|| {
        // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes plain integers.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc != 0 {
            tracing::warn!(
                "cannot make corral a child subreaper: a program that leaves its process group \
                 may outlive its run: {}",
                std::io::Error::last_os_error()
            );
        }
        rc == 0
    })
}

/// A child corral started and waits for itself, registered until dropped so
/// that it is neither killed as an escapee nor waited for by [`Tree`].
#[derive(Debug)]
pub struct HostChild(i32);

impl HostChild {
    /// Registers `pid`.
    pub fn track(pid: u32) -> Self {
        let pid = pid as i32;
        if let Ok(mut live) = HOST_CHILDREN.lock() {
            live.push(pid);
        }
        Self(pid)
    }
}

impl Drop for HostChild {
    fn drop(&mut self) {
        if let Ok(mut live) = HOST_CHILDREN.lock()
            && let Some(i) = live.iter().position(|p| *p == self.0)
        {
            live.swap_remove(i);
        }
    }
}

/// One entry of `/proc`.
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    zombie: bool,
}

/// Every process this process can see.
fn scan() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
            let rest = &stat[stat.rfind(')')? + 1..];
            let mut fields = rest.split_whitespace();
            let state = fields.next()?;
            let ppid = fields.next()?.parse().ok()?;
            let pgrp = fields.next()?.parse().ok()?;
            Some(Proc {
                pid,
                ppid,
                pgrp,
                zombie: state == "Z" || state == "X",
            })
        })
        .collect()
}

/// The processes of one program run, killed when this is dropped.
pub(super) struct Tree {
    root: i32,
    /// The run's `pids` cgroup, when there is one.
    cgroup: Option<super::PidsCgroup>,
    /// Whether [`Tree::kill_all`] has run and nothing is left to do on drop.
    finished: bool,
    _registered: HostChild,
}

impl Tree {
    /// Follows the program `root`, which was started in its own process group.
    pub(super) fn new(root: u32, cgroup: Option<super::PidsCgroup>) -> Self {
        Self {
            root: root as i32,
            cgroup,
            finished: false,
            _registered: HostChild::track(root),
        }
    }

    /// Makes corral the subreaper before the first program starts.
    pub(super) fn prepare() {
        subreaper();
    }

    /// Kills every process of the run (see [`kill_tree`]), then waits for
    /// the ones corral adopted.
    pub(super) fn kill_all(&mut self) {
        self.finished = true;
        let killed = kill_tree(self.root);
        if let Some(c) = &self.cgroup {
            c.kill_all();
        }
        self.reap(&killed);
    }

    /// Starts counting the run's processes on a thread of its own, which
    /// kills them all once there are more than `budget`; the receiver hears
    /// when it did. The thread stops when the returned guard is dropped.
    pub(super) fn watch(&self, budget: usize) -> (Watchdog, tokio::sync::oneshot::Receiver<()>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let fired = std::sync::Arc::new(AtomicBool::new(false));
        let root = self.root;
        let stopped = stop.clone();
        let fire = fired.clone();
        let spawned = std::thread::Builder::new()
            .name("corral-budget".into())
            .spawn(move || {
                raise_priority();
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(BUDGET_POLL);
                    if count(root) > budget {
                        // Set before the kill: the program's exit may be
                        // seen before the message below.
                        fire.store(true, Ordering::SeqCst);
                        kill_tree(root);
                        let _ = tx.send(());
                        return;
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot watch the process budget of a program: {e}");
        }
        (Watchdog { stop, fired }, rx)
    }

    /// Waits for adopted children (corral's children it did not start)
    /// that are dead, giving the ones just killed a moment to die.
    fn reap(&self, killed: &HashSet<i32>) {
        if !subreaper() {
            return;
        }
        let me = std::process::id() as i32;
        for _ in 0..100 {
            let (procs, host) = snapshot();
            let mut dying = false;
            for p in procs
                .iter()
                .filter(|p| p.ppid == me && !host.contains(&p.pid) && p.pid != self.root)
            {
                if p.zombie {
                    let mut status = 0;
                    // SAFETY: waitpid on one pid that corral adopted and no one
                    // else waits for, with a valid status pointer.
                    unsafe {
                        libc::waitpid(p.pid, &mut status, libc::WNOHANG);
                    }
                } else if killed.contains(&p.pid) {
                    dying = true;
                }
            }
            if !dying {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Stops a [`Tree::watch`] thread when dropped.
pub(super) struct Watchdog {
    stop: std::sync::Arc<AtomicBool>,
    fired: std::sync::Arc<AtomicBool>,
}

impl Watchdog {
    /// Whether the budget was exceeded and the run's processes killed.
    pub(super) fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How often [`Tree::watch`] counts.
const BUDGET_POLL: Duration = Duration::from_millis(20);

/// Gives the calling thread precedence over the programs it watches: a fork
/// bomb makes thousands of runnable processes, among which a thread of
/// ordinary priority gets too little time to count and kill them. Real-time
/// first (root may), else the highest nice value.
fn raise_priority() {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: plain integers and a pointer to a local that outlives the call.
    unsafe {
        if libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) != 0 {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -20);
        }
    }
}

/// The live (not yet reaped) processes of the run of `root` in `procs`:
/// its descendants, its process group and, when corral is the subreaper,
/// corral's children it did not start, with their descendants.
fn members(root: i32, (procs, host): &(Vec<Proc>, Vec<i32>)) -> Vec<Proc> {
    let me = std::process::id() as i32;
    let adopted = subreaper();
    let mut children: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, p) in procs.iter().enumerate() {
        children.entry(p.ppid).or_default().push(i);
    }
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = procs
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            p.pid != me
                && (p.pid == root
                    || p.pgrp == root
                    || (adopted && p.ppid == me && !host.contains(&p.pid)))
        })
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    while let Some(i) = stack.pop() {
        let p = procs[i];
        if !seen.insert(p.pid) {
            continue;
        }
        out.push(p);
        stack.extend(children.get(&p.pid).into_iter().flatten().copied());
    }
    out
}

/// How many processes of the run of `root` are alive.
fn count(root: i32) -> usize {
    members(root, &snapshot())
        .iter()
        .filter(|p| !p.zombie)
        .count()
}

/// Kills every process of the run of `root`, until a pass over `/proc`
/// finds none left alive that was not already killed: a process killed
/// while it forks cannot fork again, so a fork bomb shrinks pass by pass.
/// Returns what it killed.
fn kill_tree(root: i32) -> HashSet<i32> {
    let mut killed: HashSet<i32> = HashSet::new();
    let mut quiet = 0;
    for _ in 0..1000 {
        let fresh: Vec<i32> = members(root, &snapshot())
            .iter()
            .filter(|p| !p.zombie && !killed.contains(&p.pid))
            .map(|p| p.pid)
            .collect();
        if fresh.is_empty() {
            // Twice, so that a child forked during a pass is seen.
            quiet += 1;
            if quiet == 2 {
                break;
            }
            continue;
        }
        quiet = 0;
        for pid in fresh {
            // SAFETY: kill takes plain integers.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            killed.insert(pid);
        }
    }
    killed
}

impl Drop for Tree {
    fn drop(&mut self) {
        if !self.finished {
            self.kill_all();
        }
    }
}
