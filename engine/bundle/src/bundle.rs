//! Staging a run directory (every member redacted and hashed), writing the reproducible
//! archive, and verifying one.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::BundleError;
use crate::redact::{Counts, RedactOptions, Redactor};

/// `manifest.json`'s `schema_version`; the reader refuses any other.
pub const MANIFEST_SCHEMA: &str = "aorta.bundle/1";
/// Bytes looked at to tell text from binary (a NUL byte among them means binary).
const SNIFF_BYTES: usize = 8192;

/// `manifest.json`, the last member of every bundle. It holds no time and no absolute path,
/// so the same run bundles to the same bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: String,
    pub ticket: String,
    /// The run directory's own name, never its path.
    pub source_run_dir: String,
    pub aorta_version: String,
    pub redaction: RedactionRecord,
    /// Sorted by path; every member but the manifest itself.
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedactionRecord {
    /// The rules that ran, in order.
    pub rules: Vec<String>,
    /// A recipe's `redaction` block was applied.
    pub recipe_block: bool,
    /// Private IP addresses and host names were redacted (`--redact-hosts`).
    pub hosts: bool,
    /// Redactions per rule over all members (contents and names).
    pub counts: Counts,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// Relative to the bundle's top directory, `/`-separated, itself redacted.
    pub path: String,
    pub bytes: u64,
    pub blake3: String,
    /// Text members are redacted; binary ones (a NUL in the first 8 KiB) are copied.
    pub text: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redactions: Counts,
}

/// What a bundle is made with.
#[derive(Debug, Clone, Default)]
pub struct BundleOptions {
    /// Overrides the run directory's name as the ticket.
    pub ticket: Option<String>,
    pub redact: RedactOptions,
    /// Recorded in the manifest.
    pub aorta_version: String,
}

/// A bundle staged in a temporary directory: everything redacted, hashed and listed, nothing
/// written where the user looks yet (`--review` shows this, then [`Staged::write`]).
#[derive(Debug)]
pub struct Staged {
    _dir: tempfile::TempDir,
    /// The archive's top directory (the ticket's slug).
    pub name: String,
    pub manifest: Manifest,
    /// `(member, staged copy, permission bits)` in manifest order.
    files: Vec<(String, PathBuf, u32)>,
    pub source_bytes: u64,
}

/// The ticket as a file name: letters, digits, `.`, `_`, `-`; anything else becomes `_`.
pub fn slug(ticket: &str) -> String {
    let s: String = ticket
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    match s.trim_matches('.') {
        "" => "_no_ticket_".into(),
        t => t.to_string(),
    }
}

/// Host names the run's environment snapshots record (`environments/*/env.json`).
pub fn hosts_in_run(run_dir: &Path) -> Vec<String> {
    #[derive(Deserialize)]
    struct Env {
        host: Option<Host>,
    }
    #[derive(Deserialize)]
    struct Host {
        hostname: Option<String>,
    }
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(run_dir.join("environments")) else {
        return out;
    };
    for d in dirs.flatten() {
        let Ok(text) = std::fs::read_to_string(d.path().join("env.json")) else {
            continue;
        };
        if let Ok(Env {
            host: Some(Host { hostname: Some(h) }),
        }) = serde_json::from_str::<Env>(&text)
        {
            // The short name too: logs print `node7` as often as `node7.cluster.local`.
            if let Some((short, _)) = h.split_once('.') {
                out.push(short.to_string());
            }
            out.push(h);
        }
    }
    out
}

/// The run's files to bundle, sorted: regular files (in-tree symlinks followed), without
/// aorta's own top-level bookkeeping (`.aorta-*`) and any earlier `manifest.json`.
fn members(root: &Path) -> Result<Vec<(String, PathBuf)>, BundleError> {
    let canon = root.canonicalize().map_err(|e| BundleError::io(root, e))?;
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(&canon).follow_links(true) {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(&canon).to_path_buf();
            BundleError::io(&path, e.into())
        })?;
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = entry.path().strip_prefix(&canon).unwrap_or(entry.path());
        let rel_str = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        if !rel_str.contains('/') && (rel_str.starts_with(".aorta-") || rel_str == "manifest.json")
        {
            continue;
        }
        if entry.path_is_symlink() {
            let target = entry
                .path()
                .canonicalize()
                .map_err(|e| BundleError::io(entry.path(), e))?;
            if !target.starts_with(&canon) {
                return Err(BundleError::UnsafeSymlink(rel.to_path_buf()));
            }
        }
        out.push((rel_str, entry.path().to_path_buf()));
    }
    out.sort();
    Ok(out)
}

/// Writes what it is given and hashes it.
struct Hashing<W> {
    inner: W,
    hasher: blake3::Hasher,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Redacts (or copies) one file into `dest`; returns `(bytes, blake3, text, counts, mode)`.
fn stage_one(
    red: &Redactor,
    src: &Path,
    dest: &Path,
) -> Result<(u64, String, bool, Counts, u32), BundleError> {
    let io = |e| BundleError::io(src, e);
    let file = File::open(src).map_err(io)?;
    let mode = permission_bits(&file.metadata().map_err(io)?);
    let mut input = BufReader::with_capacity(64 << 10, file);
    let head = io::BufRead::fill_buf(&mut input).map_err(io)?;
    let text = !head[..head.len().min(SNIFF_BYTES)].contains(&0);
    let out = File::create(dest).map_err(|e| BundleError::io(dest, e))?;
    let mut w = Hashing {
        inner: BufWriter::new(out),
        hasher: blake3::Hasher::new(),
        bytes: 0,
    };
    let mut counts = Counts::new();
    if text {
        red.redact_stream(&mut input, &mut w, &mut counts)
            .map_err(io)?;
    } else {
        io::copy(&mut input, &mut w).map_err(io)?;
    }
    w.flush().map_err(|e| BundleError::io(dest, e))?;
    Ok((
        w.bytes,
        w.hasher.finalize().to_hex().to_string(),
        text,
        counts,
        mode,
    ))
}

#[cfg(unix)]
fn permission_bits(m: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o777
}

#[cfg(not(unix))]
fn permission_bits(_: &std::fs::Metadata) -> u32 {
    0o644
}

/// Stages `run_dir` for a bundle: every member redacted (in parallel) into a temporary
/// directory under `staging_parent`, hashed and listed in the manifest.
pub fn stage(
    run_dir: &Path,
    opts: &BundleOptions,
    staging_parent: &Path,
) -> Result<Staged, BundleError> {
    if !run_dir.is_dir() {
        return Err(BundleError::NotADirectory(run_dir.to_path_buf()));
    }
    if !run_dir.join("matrix.json").is_file() {
        return Err(BundleError::NotARun(run_dir.to_path_buf()));
    }
    let leaf = run_dir
        .canonicalize()
        .map_err(|e| BundleError::io(run_dir, e))?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let red = Redactor::new(&opts.redact);
    let mut name_counts = Counts::new();
    let ticket = red.redact_str(opts.ticket.as_deref().unwrap_or(&leaf), &mut name_counts);
    let source_run_dir = red.redact_str(&leaf, &mut name_counts);
    let name = slug(&ticket);
    // Listed before the staging directory exists: it may lie inside the run directory.
    let found = members(run_dir)?;
    let dir = tempfile::Builder::new()
        .prefix(".aorta-bundle-")
        .tempdir_in(staging_parent)
        .map_err(|e| BundleError::io(staging_parent, e))?;
    let source_bytes = found
        .iter()
        .map(|(_, p)| p.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    let staged: Vec<_> = found
        .par_iter()
        .enumerate()
        .map(|(i, (_, src))| stage_one(&red, src, &dir.path().join(format!("m{i}"))))
        .collect::<Result<_, _>>()?;
    let mut rows: Vec<(Member, PathBuf, u32)> = Vec::new();
    let mut taken = std::collections::BTreeSet::new();
    for (i, ((rel, _), (bytes, digest, text, mut counts, mode))) in
        found.iter().zip(staged).enumerate()
    {
        // File names can hold secrets too (a collected file named after a token).
        let mut path = red.redact_str(rel, &mut counts);
        while !taken.insert(path.clone()) {
            path.push_str(".dup");
        }
        rows.push((
            Member {
                path,
                bytes,
                blake3: digest,
                text,
                redactions: counts,
            },
            dir.path().join(format!("m{i}")),
            mode,
        ));
    }
    rows.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    let mut counts = name_counts;
    for (m, ..) in &rows {
        for (rule, n) in &m.redactions {
            *counts.entry(rule.clone()).or_default() += n;
        }
    }
    let manifest = Manifest {
        schema_version: MANIFEST_SCHEMA.into(),
        ticket,
        source_run_dir,
        aorta_version: opts.aorta_version.clone(),
        redaction: RedactionRecord {
            rules: red.rule_names().iter().map(|s| s.to_string()).collect(),
            recipe_block: opts.redact.recipe.is_some(),
            hosts: opts.redact.hosts.is_some(),
            counts,
        },
        members: rows.iter().map(|(m, ..)| m.clone()).collect(),
    };
    let files = rows
        .into_iter()
        .map(|(m, p, mode)| (m.path, p, mode))
        .collect();
    Ok(Staged {
        _dir: dir,
        name,
        manifest,
        files,
        source_bytes,
    })
}

/// A tar header with nothing of the machine or the moment in it.
fn header(size: u64, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h.set_entry_type(tar::EntryType::Regular);
    h
}

impl Staged {
    /// The default file name: `<ticket slug>.bundle.tar.gz`.
    pub fn file_name(&self) -> String {
        format!("{}.bundle.tar.gz", self.name)
    }

    /// Writes the archive to `output`, a path the user named, by `aorta_fsutil::UserFile`'s
    /// rules: a new or regular file atomically (temp file beside it, fsync, rename), a device
    /// or FIFO written through, a symlink followed. Members sorted, `manifest.json` last,
    /// headers with mtime 0 and uid/gid 0, a gzip header without a time: the same staged run
    /// gives the same bytes. Returns how many bytes were written.
    pub fn write(&self, output: &Path) -> Result<u64, BundleError> {
        let io = |e| BundleError::output(output, e);
        let mut out = aorta_fsutil::UserFile::create(output).map_err(io)?;
        let bytes;
        {
            let counted = Hashing {
                inner: BufWriter::new(out.file()),
                hasher: blake3::Hasher::new(),
                bytes: 0,
            };
            let gz = flate2::GzBuilder::new()
                .mtime(0)
                .operating_system(255)
                .write(counted, flate2::Compression::default());
            let mut tar = tar::Builder::new(gz);
            for (path, staged, mode) in &self.files {
                let f = File::open(staged).map_err(|e| BundleError::io(staged, e))?;
                let len = f.metadata().map_err(|e| BundleError::io(staged, e))?.len();
                tar.append_data(&mut header(len, *mode), format!("{}/{path}", self.name), f)
                    .map_err(io)?;
            }
            let mut json = serde_json::to_vec_pretty(&self.manifest).map_err(BundleError::Json)?;
            json.push(b'\n');
            tar.append_data(
                &mut header(json.len() as u64, 0o644),
                format!("{}/manifest.json", self.name),
                &json[..],
            )
            .map_err(io)?;
            let gz = tar.into_inner().map_err(io)?;
            let mut counted = gz.finish().map_err(io)?;
            counted.flush().map_err(io)?;
            bytes = counted.bytes;
        }
        out.finish().map_err(io)?;
        Ok(bytes)
    }

    /// What `--review` shows: the members, their sizes and redactions, and the totals.
    pub fn review(&self) -> String {
        let m = &self.manifest;
        let bytes: u64 = m.members.iter().map(|x| x.bytes).sum();
        let mut s = format!(
            "Bundle {} of run directory {}: {} members, {bytes} bytes (run directory {} bytes)\n",
            m.ticket,
            m.source_run_dir,
            m.members.len() + 1,
            self.source_bytes
        );
        s.push_str(&format!("Rules: {}\n", m.redaction.rules.join(", ")));
        let total: Vec<String> = m
            .redaction
            .counts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        s.push_str(&format!(
            "Redactions: {}\n",
            if total.is_empty() {
                "none".into()
            } else {
                total.join(", ")
            }
        ));
        for x in &m.members {
            let r: Vec<String> = x
                .redactions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let kind = if x.text { "" } else { " [binary, copied]" };
            s.push_str(&format!("  {:>10}  {}{kind}", x.bytes, x.path));
            if !r.is_empty() {
                s.push_str(&format!("  ({})", r.join(", ")));
            }
            s.push('\n');
        }
        s.push_str("  (manifest.json last)\n");
        s
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyReport {
    pub ticket: String,
    /// Members whose digest and size were checked.
    pub checked: usize,
    /// Empty when the bundle is intact.
    pub problems: Vec<String>,
}

/// Re-reads a bundle and checks every member against the manifest's size and blake3, and
/// that the manifest lists exactly the members there are.
pub fn verify(path: &Path) -> Result<VerifyReport, BundleError> {
    let io = |e| BundleError::io(path, e);
    let file = File::open(path).map_err(io)?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(BufReader::new(file)));
    let mut seen: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut manifest: Option<Manifest> = None;
    for entry in archive.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        let name = entry.path().map_err(io)?.to_string_lossy().into_owned();
        let rel = name
            .split_once('/')
            .map_or(name.as_str(), |(_, r)| r)
            .to_string();
        if rel == "manifest.json" {
            let mut text = String::new();
            entry.read_to_string(&mut text).map_err(io)?;
            let m: Manifest = serde_json::from_str(&text).map_err(BundleError::Json)?;
            if m.schema_version != MANIFEST_SCHEMA {
                return Err(BundleError::Schema(m.schema_version));
            }
            manifest = Some(m);
            continue;
        }
        let mut h = Hashing {
            inner: io::sink(),
            hasher: blake3::Hasher::new(),
            bytes: 0,
        };
        io::copy(&mut entry, &mut h).map_err(io)?;
        seen.insert(rel, (h.bytes, h.hasher.finalize().to_hex().to_string()));
    }
    let m = manifest.ok_or(BundleError::NoManifest)?;
    let mut problems = Vec::new();
    let mut checked = 0;
    for x in &m.members {
        match seen.remove(&x.path) {
            None => problems.push(format!(
                "{}: listed in the manifest, not in the archive",
                x.path
            )),
            Some((bytes, digest)) => {
                checked += 1;
                if bytes != x.bytes || digest != x.blake3 {
                    problems.push(format!(
                        "{}: blake3 {digest} ({bytes} bytes), manifest says {} ({} bytes)",
                        x.path, x.blake3, x.bytes
                    ));
                }
            }
        }
    }
    problems.extend(
        seen.keys()
            .map(|p| format!("{p}: in the archive, not in the manifest")),
    );
    Ok(VerifyReport {
        ticket: m.ticket,
        checked,
        problems,
    })
}
