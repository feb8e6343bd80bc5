//! The session log: one append-only JSONL file per session, one event per
//! line with a sequence number, in `$XDG_DATA_HOME/corral/sessions/<workspace
//! key>/<id>.jsonl`.
//!
//! Durability: every line is written whole with a single `write`, so a
//! killed process loses nothing it wrote. The file is fsynced by group
//! commit, where losing an event would lose work, not per event: before a
//! tool's effects happen ([`SessionLog::sync`] from the loop), at the end of
//! a turn, and before the front-end is shown an event that acknowledges
//! something to the user ([`Event::acknowledges`]: a tool's result, a
//! changed mode), which [`acknowledge`] holds back until the log is on disk
//! while the loop goes on. One fsync covers every line written before it,
//! so the events of an iteration share one; none happens before the first
//! request. After a crash the last line may be torn; readers skip a final
//! line that does not parse, and the next writer starts on a fresh line. Tool outputs cut for the model are saved whole as artifacts
//! beside the log.

use crate::protocol::Event;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the session, from 1, without gaps.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub ts_ms: u64,
    /// What happened.
    pub event: Event,
}

/// `events` as a log holds them, numbered from 1 and with no time: a
/// history to replay that was never written (tests, benchmarks).
pub fn numbered(events: impl IntoIterator<Item = Event>) -> Vec<Record> {
    (1..)
        .zip(events)
        .map(|(seq, event)| Record {
            seq,
            ts_ms: 0,
            event,
        })
        .collect()
}

/// A [`Record`] as it is written, borrowing its event.
#[derive(Serialize)]
struct RecordRef<'a> {
    seq: u64,
    ts_ms: u64,
    event: &'a Event,
}

/// The file name [`SessionLog::save_artifact`] gives the artifact `name`:
/// never a path, whatever `name` holds.
pub fn artifact_file(name: &str) -> String {
    format!("{}.txt", corral_syntax::file_name(name))
}

/// Where the sessions of every workspace live.
pub fn sessions_root() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("corral").join("sessions"))
}

/// The directory of one workspace's sessions.
pub fn workspace_dir(root: &Path, workspace: &Path) -> PathBuf {
    let hash = hex::encode(Sha256::digest(workspace.to_string_lossy().as_bytes()));
    let name = workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let safe = corral_syntax::file_name(&name);
    root.join(format!("{safe}-{}", &hash[..12]))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A new session id: sortable by time, unique enough for one user.
pub fn new_id() -> String {
    let ms = now_ms();
    let secs = ms / 1000;
    let (y, mo, d, h, mi, s) = civil(secs);
    // Two sessions opened in the same millisecond by one thread (parallel
    // subagents) differ by the counter.
    static OPENED: AtomicU64 = AtomicU64::new(0);
    let salt = Sha256::digest(format!(
        "{ms}-{}-{:?}-{}",
        std::process::id(),
        std::thread::current().id(),
        OPENED.fetch_add(1, Ordering::Relaxed)
    ));
    format!(
        "{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}-{}",
        &hex::encode(salt)[..6]
    )
}

/// Seconds since the epoch to UTC calendar fields.
pub fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

/// An open session log, appending.
pub struct SessionLog {
    id: String,
    path: PathBuf,
    file: File,
    next_seq: u64,
    durable: Durable,
}

/// What of a session log is on disk, shared by the log and whoever makes
/// it durable off the loop's path ([`acknowledge`]).
#[derive(Clone)]
pub struct Durable(Arc<DurableState>);

struct DurableState {
    /// A descriptor of the log's file, for fsync from any thread.
    file: File,
    /// The directory of a newly created log, synced with its first fsync
    /// so that the file's entry is durable too.
    dir: Mutex<Option<PathBuf>>,
    /// Records written (the last one's sequence number).
    written: AtomicU64,
    /// Records on disk; the lock also keeps two syncs from racing.
    synced: Mutex<u64>,
}

impl Durable {
    fn new(file: &File, written: u64, dir: Option<PathBuf>) -> std::io::Result<Self> {
        Ok(Self(Arc::new(DurableState {
            file: file.try_clone()?,
            dir: Mutex::new(dir),
            written: AtomicU64::new(written),
            synced: Mutex::new(written),
        })))
    }

    /// Whether every record written so far is on disk.
    pub fn is_synced(&self) -> bool {
        let written = self.0.written.load(Ordering::Acquire);
        self.0.synced.lock().is_ok_and(|s| *s >= written)
    }

    /// Puts every record written so far on disk (one fsync for all of
    /// them; none when they already are). Blocks: call it off the async
    /// runtime's threads, or where waiting is the point.
    pub fn sync(&self) -> std::io::Result<()> {
        let mut synced = self
            .0
            .synced
            .lock()
            .map_err(|_| std::io::Error::other("a session-log sync panicked"))?;
        let written = self.0.written.load(Ordering::Acquire);
        if *synced >= written {
            return Ok(());
        }
        self.0.file.sync_data()?;
        let dir = self.0.dir.lock().ok().and_then(|mut d| d.take());
        if let Some(dir) = dir {
            File::open(&dir)?.sync_all()?;
        }
        *synced = written;
        tracing::debug!(records = written, "session log synced");
        Ok(())
    }
}

/// Sends `events` on to `ui` in order, holding back each event that
/// acknowledges something to the user ([`Event::acknowledges`]) until the
/// log behind `durable` is on disk, so what the user was shown survives a
/// crash of the machine, not only of the process. The sync runs on a
/// blocking thread while the loop goes on (the next request is on its way
/// meanwhile); one sync covers everything written before it. Ends when
/// `events` closes or `ui` does.
pub async fn acknowledge(
    mut events: tokio::sync::mpsc::UnboundedReceiver<Event>,
    ui: tokio::sync::mpsc::UnboundedSender<Event>,
    durable: Durable,
) {
    while let Some(event) = events.recv().await {
        if event.acknowledges() && !durable.is_synced() {
            let d = durable.clone();
            let synced = tokio::task::spawn_blocking(move || d.sync())
                .await
                .unwrap_or_else(|_| Err(std::io::Error::other("the sync thread panicked")));
            if let Err(e) = synced {
                let _ = ui.send(Event::Error {
                    message: format!(
                        "the session log cannot be written to disk ({e}); what follows may be \
                         lost if the machine stops. Check the disk holding the session logs"
                    ),
                });
            }
        }
        if ui.send(event).is_err() {
            break;
        }
    }
}

impl SessionLog {
    /// Creates a new session in `dir`.
    pub fn create(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let id = new_id();
        let path = dir.join(format!("{id}.jsonl"));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)?;
        // The directory entry is made durable with the first sync, which
        // comes before anything is acknowledged; a session that dies
        // before it has nothing to lose.
        let durable = Durable::new(&file, 0, Some(dir.to_path_buf()))?;
        Ok(Self {
            id,
            path,
            file,
            next_seq: 1,
            durable,
        })
    }

    /// Opens an existing session to append to it, after reading it whole.
    pub fn open(path: &Path) -> std::io::Result<(Self, Vec<Record>)> {
        let records = read(path)?;
        let file = OpenOptions::new().append(true).read(true).open(path)?;
        {
            // Another corral may be writing a record of several buffers:
            // its unfinished line is not a torn one to cut.
            let _held = lock(&file);
            repair_tail(&file)?;
        }
        let id = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let next_seq = records.last().map_or(1, |r| r.seq + 1);
        let durable = Durable::new(&file, next_seq - 1, None)?;
        Ok((
            Self {
                id,
                path: path.to_path_buf(),
                file,
                next_seq,
                durable,
            },
            records,
        ))
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where artifacts (whole tool outputs) of this session go.
    pub fn artifacts_dir(&self) -> PathBuf {
        self.path.with_extension("artifacts")
    }

    /// Appends one event, written whole before this returns; `durable`
    /// also puts it (and everything before it) on disk before returning.
    pub fn append(&mut self, event: &Event, durable: bool) -> std::io::Result<u64> {
        let seq = self.next_seq;
        let record = RecordRef {
            seq,
            ts_ms: now_ms(),
            event,
        };
        {
            // A record of several buffers is several writes: the lock keeps a
            // second corral appending to the same session (two `resume`s of
            // it) from putting its record inside this one. Where the file
            // system has no locks, the record is written unlocked.
            let _held = lock(&self.file);
            write_record(&self.file, &record)?;
        }
        self.next_seq += 1;
        self.durable.0.written.store(seq, Ordering::Release);
        if durable {
            self.durable.sync()?;
        }
        Ok(seq)
    }

    /// Puts every event appended so far on disk: before a tool's effects
    /// happen and at the end of a turn.
    pub fn sync(&self) -> std::io::Result<()> {
        self.durable.sync()
    }

    /// The log's durability, for [`acknowledge`].
    pub fn durability(&self) -> Durable {
        self.durable.clone()
    }

    /// Saves `content` as an artifact named `name`, durably, and returns its path.
    pub fn save_artifact(&self, name: &str, content: &str) -> std::io::Result<PathBuf> {
        let dir = self.artifacts_dir();
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(artifact_file(name));
        let mut f = File::create(&path)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
        Ok(path)
    }
}

impl Drop for SessionLog {
    /// What a closing session wrote last (its `session_end` hooks, say)
    /// reaches the disk too.
    fn drop(&mut self) {
        if let Err(e) = self.durable.sync() {
            tracing::warn!(
                "the session log {} cannot be synced: {e}",
                self.path.display()
            );
        }
    }
}

/// The buffer a record is serialised through on its way to the file.
const APPEND_BUFFER: usize = 64 * 1024;

/// Writes `record` and its newline at the end of `file` through a buffer
/// of [`APPEND_BUFFER`], not built whole first: a long answer is a record
/// of megabytes, and a copy of it in fresh memory cost more than the
/// write. A record under the buffer's size is one write. A record that
/// fails part-way is cut off the file again, so the next one does not
/// follow a torn line; what was still buffered is dropped, not written.
fn write_record(file: &File, record: &impl Serialize) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(APPEND_BUFFER, Counting { file, written: 0 });
    let wrote = serde_json::to_writer(&mut out, record)
        .map_err(std::io::Error::other)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    let (counted, _) = out.into_parts();
    if let Err(e) = wrote {
        if counted.written > 0 {
            let len = file.metadata()?.len();
            file.set_len(len.saturating_sub(counted.written))?;
        }
        return Err(e);
    }
    Ok(())
}

/// The log file's lock (see [`SessionLog::append`]), or `None` where the
/// file system has none.
fn lock(file: &File) -> Option<Held<'_>> {
    file.lock().ok().map(|()| Held(file))
}

/// The log file's lock, released when dropped.
struct Held<'a>(&'a File);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// The log file, counting the bytes written to it.
struct Counting<'a> {
    file: &'a File,
    written: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = (&*self.file).write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Makes the file end on a record boundary after a crash: a complete last
/// record that only lacks its newline gets one; a last line that does not
/// parse (torn by a crash, or damaged, even if it ends in a newline) is cut
/// off, so the next record is not appended behind it. This is exactly the
/// line [`read`] skips: a log that reads cleanly stays readable after an
/// append.
fn repair_tail(file: &File) -> std::io::Result<()> {
    use std::io::Read;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    // Only the end matters: read back far enough to hold the last line
    // that is not blank, from its start.
    let mut window = 64 * 1024u64;
    let (start, data, content_end) = loop {
        let start = len.saturating_sub(window);
        let mut data = Vec::with_capacity((len - start) as usize);
        (&*file).seek(std::io::SeekFrom::Start(start))?;
        file.take(len - start).read_to_end(&mut data)?;
        let content_end = data
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        if start == 0 || data[..content_end].contains(&b'\n') {
            break (start, data, content_end);
        }
        window *= 4;
    };
    if content_end == 0 {
        // Only blank lines, which readers skip.
        return Ok(());
    }
    let last = data[..content_end]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    if parse_line(&data[last..content_end]).is_err() {
        file.set_len(start + last as u64)?;
    } else if data.ends_with(b"\n") {
        return Ok(());
    } else {
        (&*file).write_all(b"\n")?;
    }
    file.sync_data()
}

/// One line of a log as a record; readers and the repair judge lines alike.
fn parse_line(line: &[u8]) -> serde_json::Result<Record> {
    serde_json::from_slice(line)
}

/// Reads a session log. A final line that does not parse (torn by a crash)
/// is skipped, as [`SessionLog::open`] cuts it before appending; a bad line
/// anywhere else is an error.
///
/// Resuming a long session is dominated by JSON parsing, so the file is
/// read whole and its lines parsed on every core, in order-preserving chunks.
pub fn read(path: &Path) -> std::io::Result<Vec<Record>> {
    let data = std::fs::read(path)?;
    let lines: Vec<&[u8]> = data
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let per = lines.len().div_ceil(threads.max(1)).max(1);
    let parsed: Vec<std::thread::Result<Vec<Result<Record, String>>>> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = lines
                .chunks(per)
                .map(|chunk| {
                    scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|l| parse_line(l).map_err(|e| e.to_string()))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
    let parsed: Vec<Vec<Result<Record, String>>> = parsed
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|_| std::io::Error::other("a session-log parser thread panicked"))?;
    let total = lines.len();
    let mut records = Vec::with_capacity(total);
    for (i, result) in parsed.into_iter().flatten().enumerate() {
        match result {
            Ok(r) => records.push(r),
            // A torn last line is a write the crash interrupted.
            Err(_) if i + 1 == total => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: record {}: {e}", path.display(), i + 1),
                ));
            }
        }
    }
    Ok(records)
}

/// A session as `corral sessions` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The id.
    pub id: String,
    /// When it started (ms since epoch).
    pub started_ms: u64,
    /// The workspace.
    pub workspace: String,
    /// The first prompt.
    pub first_prompt: String,
    /// How its last run ended, or `incomplete` when the log has no stop.
    pub status: String,
    /// The session that started it, when it is a subagent's.
    pub parent: Option<String>,
    /// The log file.
    pub path: PathBuf,
}

/// What `corral sessions` shows of one log, read from its head (start time,
/// workspace, first prompt) and its tail (how the last run ended), so that
/// listing costs the same however long the sessions are.
fn summarise(path: &Path) -> std::io::Result<Summary> {
    summarise_with(path, true)
}

/// [`summarise`], reading the tail (for the status) only when `tail`; the
/// status is `incomplete` without it.
fn summarise_with(path: &Path, tail: bool) -> std::io::Result<Summary> {
    use std::io::{BufRead, BufReader, Read, SeekFrom};
    let mut s = Summary {
        id: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        started_ms: 0,
        workspace: String::new(),
        first_prompt: String::new(),
        status: "incomplete".into(),
        parent: None,
        path: path.to_path_buf(),
    };
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();

    // Head: records up to the first prompt.
    let mut head = BufReader::new(&file);
    let mut line = Vec::new();
    let mut first = true;
    while head.read_until(b'\n', &mut line)? > 0 {
        if let Ok(r) = serde_json::from_slice::<Record>(&line) {
            if first {
                s.started_ms = r.ts_ms;
                first = false;
            }
            match r.event {
                Event::SessionStarted { workspace, .. } => s.workspace = workspace,
                Event::SubagentStarted { parent, .. } => s.parent = Some(parent),
                Event::UserMessage { text } => {
                    s.first_prompt = text;
                    break;
                }
                _ => {}
            }
        }
        line.clear();
    }

    if !tail {
        return Ok(s);
    }
    // Tail: the last turn boundary or stop, in a window that grows until
    // it holds one.
    let mut window: u64 = 64 << 10;
    let mut buf = Vec::new();
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        buf.clear();
        (&file).take(len - start).read_to_end(&mut buf)?;
        // Unless the window starts the file, its first line is partial.
        let body = match (start, buf.iter().position(|&b| b == b'\n')) {
            (0, _) => &buf[..],
            (_, Some(i)) => &buf[i + 1..],
            (_, None) => &buf[..0],
        };
        // Only a line that names one of the two events can be one: the
        // last such line is found by a backward search, so a long turn
        // costs a scan, not a parse of every record.
        let status = last_boundary(body);
        if let Some(status) = status {
            s.status = status;
            break;
        }
        if start == 0 {
            break;
        }
        window = window.saturating_mul(4);
    }
    Ok(s)
}

/// How the last run in `body` (whole lines of a log) ended: `incomplete`
/// after a turn's begin, else the reason of its stop; `None` when it has
/// neither.
fn last_boundary(body: &[u8]) -> Option<String> {
    // A forward search is the fast one; the lines that name either event
    // are few, and tried from the last.
    let mut hits: Vec<usize> = [&b"\"type\":\"stop\""[..], b"\"type\":\"turn_begin\""]
        .iter()
        .flat_map(|pattern| memchr::memmem::find_iter(body, pattern))
        .collect();
    hits.sort_unstable();
    for &at in hits.iter().rev() {
        let start = memchr::memrchr(b'\n', &body[..at]).map_or(0, |i| i + 1);
        let stop = memchr::memchr(b'\n', &body[at..]).map_or(body.len(), |i| at + i);
        if let Ok(r) = serde_json::from_slice::<Record>(&body[start..stop]) {
            match r.event {
                Event::TurnBegin { .. } => return Some("incomplete".to_owned()),
                Event::Stop { reason, .. } => return Some(reason.as_str().to_owned()),
                _ => {}
            }
        }
    }
    None
}

/// Ends the logs of `session`'s subagents, and of theirs, that a kill of
/// the process left without a stop: each gets the interrupted stop it
/// would have written had it been cancelled. Returns their ids. Called
/// when `session` resumes, since its own interrupted `task` calls are
/// closed then too.
pub fn close_children(dir: &Path, session: &str) -> std::io::Result<Vec<String>> {
    let mut closed = Vec::new();
    for child in descendants(dir, session)? {
        // A log that cannot be read is left as it is, as `list` leaves it out.
        let Ok(summary) = summarise(&child.path) else {
            continue;
        };
        if summary.status != "incomplete" {
            continue;
        }
        let (mut log, _) = SessionLog::open(&child.path)?;
        log.append(
            &Event::Stop {
                reason: crate::protocol::StopReason::Interrupted,
                message: Some(format!(
                    "the process ended while this subagent ran; closed when session \
                     {session} resumed"
                )),
            },
            true,
        )?;
        closed.push(child.id.clone());
    }
    Ok(closed)
}

/// The subagents of `session` in the workspace's log directory `dir`, and
/// theirs, at any depth: found by the parents their heads name, so only
/// each log's head is read (the session's own log may be a long turn of
/// tens of megabytes).
pub fn descendants(dir: &Path, session: &str) -> std::io::Result<Vec<Summary>> {
    let all = list_heads(dir)?;
    let mut found = Vec::new();
    let mut parents = vec![session.to_owned()];
    while let Some(parent) = parents.pop() {
        for child in all
            .iter()
            .filter(|s| s.parent.as_deref() == Some(parent.as_str()))
        {
            // Its own children may be open under a closed child.
            parents.push(child.id.clone());
            found.push(child.clone());
        }
    }
    Ok(found)
}

/// Every session of a workspace, oldest first.
pub fn list(dir: &Path) -> std::io::Result<Vec<Summary>> {
    list_with(dir, true)
}

/// [`list`] without reading the logs' tails: every status is
/// `incomplete`. For finding a session, where a long last turn would
/// otherwise be scanned for its end.
pub fn list_heads(dir: &Path) -> std::io::Result<Vec<Summary>> {
    list_with(dir, false)
}

/// [`list`], with each log's status read from its tail only when `tail`.
fn list_with(dir: &Path, tail: bool) -> std::io::Result<Vec<Summary>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let Ok(summary) = summarise_with(&path, tail) else {
            continue;
        };
        out.push(summary);
    }
    out.sort_by(|a, b| a.started_ms.cmp(&b.started_ms).then(a.id.cmp(&b.id)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(text: &str) -> Event {
        Event::UserMessage { text: text.into() }
    }

    /// A new session with one record (`start`): its directory (kept
    /// alive), the log and its path.
    fn started() -> (tempfile::TempDir, SessionLog, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SessionLog::create(dir.path()).unwrap();
        log.append(&event("start"), true).unwrap();
        let path = log.path().to_path_buf();
        (dir, log, path)
    }

    /// The texts of a log made only of [`event`]s, in order.
    fn texts(path: &Path) -> Vec<String> {
        read(path)
            .unwrap()
            .into_iter()
            .map(|r| match r.event {
                Event::UserMessage { text } => text,
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[test]
    fn summaries_read_the_head_and_the_tail() {
        use crate::protocol::StopReason;
        let dir = tempfile::tempdir().unwrap();
        let mut log = SessionLog::create(dir.path()).unwrap();
        let started = Event::SessionStarted {
            session_id: log.id().to_owned(),
            workspace: "/ws".into(),
            provider: "replay".into(),
            model: String::new(),
        };
        log.append(&started, true).unwrap();
        log.append(&Event::TurnBegin { turn: 1 }, false).unwrap();
        log.append(&event("first prompt"), false).unwrap();
        let stop = |reason| Event::Stop {
            reason,
            message: None,
        };
        log.append(&stop(StopReason::FinalAnswer), true).unwrap();
        let listed = |dir: &Path| list(dir).unwrap().remove(0);
        let s = listed(dir.path());
        assert_eq!(
            (
                s.workspace.as_str(),
                s.first_prompt.as_str(),
                s.status.as_str()
            ),
            ("/ws", "first prompt", "final_answer")
        );
        // A second turn that never ended, followed by far more than the
        // first tail window of records: the window grows until it finds
        // the turn's start.
        log.append(&Event::TurnBegin { turn: 2 }, false).unwrap();
        for i in 0..3000 {
            log.append(&event(&format!("later message {i:>40}")), false)
                .unwrap();
        }
        assert!(std::fs::metadata(log.path()).unwrap().len() > 4 * (64 << 10));
        let s = listed(dir.path());
        assert_eq!(
            (s.first_prompt.as_str(), s.status.as_str()),
            ("first prompt", "incomplete")
        );
        // Interrupted after that: the last stop wins again.
        log.append(&stop(StopReason::Interrupted), true).unwrap();
        assert_eq!(listed(dir.path()).status, "interrupted");
        // The same answer as reading every record.
        let records = read(log.path()).unwrap();
        assert_eq!(s.started_ms, records[0].ts_ms);
    }

    #[test]
    fn a_record_many_times_the_buffer_is_written_whole_between_its_neighbours() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SessionLog::create(dir.path()).unwrap();
        // Escapes and multi-byte characters across the buffer's edges.
        let long = "line \"quoted\"\n\tnaïve ✓ ".repeat(40_000);
        assert!(long.len() > 10 * APPEND_BUFFER);
        log.append(&event("before"), false).unwrap();
        log.append(&event(&long), true).unwrap();
        log.append(&event("after"), true).unwrap();
        assert_eq!(texts(log.path()), ["before", long.as_str(), "after"]);
        assert_eq!(
            std::fs::read(log.path())
                .unwrap()
                .iter()
                .filter(|&&b| b == b'\n')
                .count(),
            3
        );
    }

    #[test]
    fn a_record_that_fails_part_way_is_cut_off_the_file_again() {
        /// Writes several buffers' worth of a record, then fails.
        struct FailsLate;
        impl Serialize for FailsLate {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::{Error, SerializeMap};
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("text", &"x".repeat(4 * APPEND_BUFFER))?;
                Err(S::Error::custom("refused part-way"))
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let mut log = SessionLog::create(dir.path()).unwrap();
        log.append(&event("before"), true).unwrap();
        let len = std::fs::metadata(log.path()).unwrap().len();
        let err = write_record(&log.file, &FailsLate).unwrap_err();
        assert!(err.to_string().contains("refused part-way"), "{err}");
        // Buffers of it had reached the file, and are gone again.
        assert_eq!(std::fs::metadata(log.path()).unwrap().len(), len);
        log.append(&event("after"), true).unwrap();
        assert_eq!(texts(log.path()), ["before", "after"]);
    }

    #[test]
    fn opening_a_session_waits_for_a_record_another_writer_is_writing() {
        let (_dir, log, path) = started();
        drop(log);
        // Another corral in the middle of a record: locked, half written.
        let line = serde_json::to_string(&RecordRef {
            seq: 2,
            ts_ms: 1,
            event: &event("written in two parts"),
        })
        .unwrap();
        let (first, rest) = line.split_at(line.len() / 2);
        let writer = OpenOptions::new().append(true).open(&path).unwrap();
        writer.lock().unwrap();
        (&writer).write_all(first.as_bytes()).unwrap();
        let opening = {
            let path = path.clone();
            std::thread::spawn(move || SessionLog::open(&path).map(|_| ()))
        };
        std::thread::sleep(std::time::Duration::from_millis(300));
        // Its repair would cut the unfinished line as torn; it waits instead.
        assert!(!opening.is_finished());
        (&writer).write_all(format!("{rest}\n").as_bytes()).unwrap();
        writer.unlock().unwrap();
        opening.join().unwrap().unwrap();
        let records = read(&path).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[1].event, event("written in two parts"));
    }

    #[test]
    fn two_writers_of_one_session_never_put_a_record_inside_another() {
        let (_dir, first, path) = started();
        let (second, _) = SessionLog::open(&path).unwrap();
        // Records of several buffers each, written at the same time through
        // two descriptions of the file, as two processes would.
        let writers: Vec<_> = [(first, 'a'), (second, 'b')]
            .into_iter()
            .map(|(mut log, c)| {
                std::thread::spawn(move || {
                    for _ in 0..8 {
                        let text = c.to_string().repeat(5 * APPEND_BUFFER);
                        log.append(&event(&text), false).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let texts = texts(&path);
        assert_eq!(texts.len(), 17);
        for text in &texts[1..] {
            assert!(
                text.len() == 5 * APPEND_BUFFER
                    && (text.bytes().all(|b| b == b'a') || text.bytes().all(|b| b == b'b'))
            );
        }
    }

    #[test]
    fn resuming_closes_only_the_unfinished_subagents_and_theirs() {
        use crate::protocol::StopReason;
        let dir = tempfile::tempdir().unwrap();
        let mut parent = SessionLog::create(dir.path()).unwrap();
        parent.append(&event("parent prompt"), true).unwrap();
        // A long last turn in the parent: its tail is not read to find its children.
        parent.append(&Event::TurnBegin { turn: 1 }, false).unwrap();
        for i in 0..2000 {
            parent
                .append(&event(&format!("step {i:>60}")), false)
                .unwrap();
        }
        let child = |of: &str, stopped: bool| {
            let mut log = SessionLog::create(dir.path()).unwrap();
            let linked = Event::SubagentStarted {
                parent: of.to_owned(),
                parent_call: "call_1".to_owned(),
                depth: 1,
                worktree: None,
            };
            log.append(&linked, false).unwrap();
            log.append(&event("child task"), false).unwrap();
            log.append(&Event::TurnBegin { turn: 1 }, true).unwrap();
            if stopped {
                let stop = Event::Stop {
                    reason: StopReason::FinalAnswer,
                    message: None,
                };
                log.append(&stop, true).unwrap();
            }
            log.id().to_owned()
        };
        let open = child(parent.id(), false);
        let done = child(parent.id(), true);
        let grandchild = child(&done, false);
        let closed = close_children(dir.path(), parent.id()).unwrap();
        assert_eq!(closed.len(), 2, "{closed:?}");
        assert!(closed.contains(&open) && closed.contains(&grandchild));
        let status = |id: &str| {
            list(dir.path())
                .unwrap()
                .into_iter()
                .find(|s| s.id == id)
                .unwrap()
                .status
        };
        assert_eq!(status(&open), "interrupted");
        assert_eq!(status(&grandchild), "interrupted");
        assert_eq!(status(&done), "final_answer");
        assert_eq!(status(parent.id()), "incomplete");
        // Closed once: a second resume finds nothing left to close.
        assert!(close_children(dir.path(), parent.id()).unwrap().is_empty());
    }

    #[test]
    fn a_crash_mid_write_loses_only_the_unfinished_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SessionLog::create(dir.path()).unwrap();
        log.append(&event("one"), true).unwrap();
        log.append(&event("two"), true).unwrap();
        let path = log.path().to_path_buf();
        drop(log);
        let whole = std::fs::read(&path).unwrap();

        // Torn last record: cut off, and the next one starts on its own line.
        std::fs::write(&path, [&whole[..], br#"{"seq":3,"ts_ms":1,"ev"#].concat()).unwrap();
        assert_eq!(read(&path).unwrap().len(), 2);
        let (mut log, records) = SessionLog::open(&path).unwrap();
        assert_eq!(records.len(), 2);
        log.append(&event("three"), true).unwrap();
        let seqs: Vec<u64> = read(&path).unwrap().iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2, 3]);

        // A complete last record that only lost its newline is kept.
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 1]).unwrap();
        let (_, records) = SessionLog::open(&path).unwrap();
        assert_eq!(records.len(), 3);
        assert!(std::fs::read(&path).unwrap().ends_with(b"\n"));

        // A damaged last line that still ends in a newline is skipped by
        // readers and cut before the next append, so the log stays readable.
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, [&whole[..], b"{\"seq\":4,\"oops\n\n"].concat()).unwrap();
        assert_eq!(read(&path).unwrap().len(), 3);
        let (mut log, records) = SessionLog::open(&path).unwrap();
        assert_eq!(records.len(), 3);
        log.append(&event("four"), true).unwrap();
        let seqs: Vec<u64> = read(&path).unwrap().iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);

        // A bad record in the middle is an error, not silently skipped.
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replacen("\"two\"", "\"two", 1);
        std::fs::write(&path, text).unwrap();
        assert!(read(&path).is_err());
    }
}
