//! A library's `DT_RPATH` and `DT_RUNPATH`: where the loader looks for what the library itself
//! loads (AORTA 0.3.0's `library_linkage`, its issue #413). `DT_RPATH` is searched before
//! `LD_LIBRARY_PATH` and also for everything loaded below the library, so one library carrying
//! it can defeat an `LD_LIBRARY_PATH` substitution; glibc ignores `DT_RPATH` on an object that
//! also has `DT_RUNPATH`, which is searched after `LD_LIBRARY_PATH` and for the object's own
//! dependencies only.
//!
//! Read as the loader reads it: the ELF header, the program headers, the `PT_DYNAMIC` segment
//! and the strings it names, through `object`'s read cache, so a 500 MB cuBLASLt costs a few KB.

use crate::error::io_reason;
use crate::schema::Linkage;
use object::elf;
use object::read::elf::{Dyn, FileHeader, ProgramHeader};
use object::read::{ReadCache, ReadRef, StringTable};
use object::Endianness;
use std::path::{Path, PathBuf};

/// Why a library's dynamic section could not be read. Recorded in its `linkage.error`, not as a
/// partial reason: the library's identity (version, blake3) is complete without it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkageError {
    #[error("cannot read {}: {}", path.display(), io_reason(source))]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not an ELF file", path.display())]
    NotElf { path: PathBuf },
    /// The file is ELF but its dynamic section is not whole: a partial read cannot say "no
    /// search path", so it says nothing.
    #[error("{}: {what}", path.display())]
    Malformed { path: PathBuf, what: &'static str },
}

/// The search paths of the ELF file at `path` (symlinks followed).
pub(crate) fn read(path: &Path) -> Result<Linkage, LinkageError> {
    let file = std::fs::File::open(path).map_err(|source| LinkageError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let data = ReadCache::new(file);
    let bad = |what| LinkageError::Malformed {
        path: path.to_path_buf(),
        what,
    };
    let ident = data
        .read_bytes_at(0, 16)
        .map_err(|()| LinkageError::NotElf {
            path: path.to_path_buf(),
        })?;
    if ident[..4] != elf::ELFMAG {
        return Err(LinkageError::NotElf {
            path: path.to_path_buf(),
        });
    }
    // e_ident[EI_CLASS]: 32- or 64-bit.
    let tags = match elf::FileClass(ident[4]) {
        elf::ELFCLASS64 => search_paths::<elf::FileHeader64<Endianness>>(&data),
        elf::ELFCLASS32 => search_paths::<elf::FileHeader32<Endianness>>(&data),
        _ => Err("unknown ELF class"),
    }
    .map_err(bad)?;
    Ok(tags.into_linkage())
}

/// What the dynamic section holds, before it becomes a [`Linkage`].
#[derive(Debug, Default)]
struct SearchPaths {
    rpath: Vec<String>,
    runpath: Vec<String>,
}

impl SearchPaths {
    fn into_linkage(self) -> Linkage {
        let join = |v: Vec<String>| (!v.is_empty()).then(|| v.join(":"));
        let (rpath, runpath) = (join(self.rpath), join(self.runpath));
        let mut tags = Vec::new();
        if rpath.is_some() {
            tags.push("rpath".to_string());
        }
        if runpath.is_some() {
            tags.push("runpath".to_string());
        }
        Linkage {
            effective: Some(effective_tag(&tags).to_string()),
            tags,
            rpath,
            runpath,
            error: None,
        }
    }
}

/// The tag the loader honours: `runpath` wins over `rpath` (glibc ignores `DT_RPATH` beside
/// `DT_RUNPATH`), else `none`.
pub(crate) fn effective_tag(tags: &[String]) -> &'static str {
    if tags.iter().any(|t| t == "runpath") {
        "runpath"
    } else if tags.iter().any(|t| t == "rpath") {
        "rpath"
    } else {
        "none"
    }
}

fn search_paths<Elf>(data: &ReadCache<std::fs::File>) -> Result<SearchPaths, &'static str>
where
    Elf: FileHeader<Endian = Endianness>,
{
    let header = Elf::parse(data).map_err(|_| "unreadable ELF header")?;
    let endian = header.endian().map_err(|_| "unknown ELF byte order")?;
    let phdrs = header
        .program_headers(endian, data)
        .map_err(|_| "unreadable program headers")?;
    let dynamic = phdrs
        .iter()
        .find_map(|p| p.dynamic(endian, data).transpose())
        .ok_or("no PT_DYNAMIC segment (not a dynamic object)")?
        .map_err(|_| "truncated dynamic segment")?;
    let (mut strtab, mut strsz) = (None, None);
    let (mut rpath, mut runpath) = (Vec::new(), Vec::new());
    let mut terminated = false;
    for d in dynamic {
        let (tag, val) = (d.tag(endian), d.val(endian));
        match tag {
            elf::DT_NULL => {
                terminated = true;
                break;
            }
            elf::DT_STRTAB => strtab = Some(val),
            elf::DT_STRSZ => strsz = Some(val),
            elf::DT_RPATH => rpath.push(val),
            elf::DT_RUNPATH => runpath.push(val),
            _ => {}
        }
    }
    if !terminated {
        return Err("dynamic segment not terminated by DT_NULL");
    }
    if rpath.is_empty() && runpath.is_empty() {
        return Ok(SearchPaths::default());
    }
    // DT_STRTAB is an address: the PT_LOAD segment that maps it gives its place in the file.
    let (addr, size) = strtab.zip(strsz).ok_or("no DT_STRTAB or DT_STRSZ")?;
    let start = phdrs
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD)
        .find_map(|p| {
            let (vaddr, filesz) = (p.p_vaddr(endian).into(), p.p_filesz(endian).into());
            (vaddr <= addr && addr - vaddr < filesz)
                .then(|| addr - vaddr + p.p_offset(endian).into())
        })
        .ok_or("DT_STRTAB outside every PT_LOAD segment")?;
    let strings = StringTable::new(data, start, start + size);
    let read = |offsets: Vec<u64>| -> Result<Vec<String>, &'static str> {
        offsets
            .into_iter()
            .map(|o| {
                let o = u32::try_from(o).map_err(|_| "string offset out of range")?;
                let s = strings
                    .get(o)
                    .map_err(|()| "unreadable DT_RPATH/DT_RUNPATH string")?;
                Ok(String::from_utf8_lossy(s).into_owned())
            })
            .collect()
    };
    Ok(SearchPaths {
        rpath: read(rpath)?,
        runpath: read(runpath)?,
    })
}

/// [`read`] for a library entry: the error, if any, is kept in the entry.
pub(crate) fn of(path: &Path) -> Linkage {
    read(path).unwrap_or_else(|e| Linkage {
        error: Some(e.to_string()),
        ..Linkage::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Builds a shared library with `cc` and the given linker flags, or `None` without a
    /// compiler (then there is nothing to read).
    fn shared_lib(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
        let src = dir.join("x.c");
        std::fs::write(&src, "int x(void) { return 42; }\n").unwrap();
        let out = dir.join(name);
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(&src)
            .args(flags)
            .status();
        match status {
            Ok(s) if s.success() => Some(out),
            Ok(s) => panic!("cc failed: {s}"),
            Err(e) => {
                eprintln!("no cc ({e}): skipped");
                None
            }
        }
    }

    #[test]
    fn rpath_runpath_both_and_neither_as_the_linker_wrote_them() {
        let d = tempfile::tempdir().unwrap();
        /// File name, linker flags, then the DT_RPATH, DT_RUNPATH and tag expected.
        type Case<'a> = (
            &'a str,
            &'a [&'a str],
            Option<&'a str>,
            Option<&'a str>,
            &'a str,
        );
        let cases: [Case; 4] = [
            (
                "librp.so",
                &["-Wl,--disable-new-dtags", "-Wl,-rpath,/x:$ORIGIN/../lib"],
                Some("/x:$ORIGIN/../lib"),
                None,
                "rpath",
            ),
            (
                "librun.so",
                &["-Wl,--enable-new-dtags", "-Wl,-rpath,/y"],
                None,
                Some("/y"),
                "runpath",
            ),
            ("libnone.so", &[], None, None, "none"),
            (
                // Two -rpath flags become one colon-separated entry.
                "libtwo.so",
                &["-Wl,--disable-new-dtags", "-Wl,-rpath,/a", "-Wl,-rpath,/b"],
                Some("/a:/b"),
                None,
                "rpath",
            ),
        ];
        for (name, flags, rpath, runpath, effective) in cases {
            let Some(lib) = shared_lib(d.path(), name, flags) else {
                return;
            };
            let l = read(&lib).unwrap();
            assert_eq!(l.rpath.as_deref(), rpath, "{name}");
            assert_eq!(l.runpath.as_deref(), runpath, "{name}");
            assert_eq!(l.effective.as_deref(), Some(effective), "{name}");
            assert_eq!(
                l.tags.len(),
                usize::from(rpath.is_some()) + usize::from(runpath.is_some())
            );
            assert_eq!(l.error, None);
        }
    }

    /// `readelf -d` of a library the system has agrees with what is read here.
    #[test]
    fn a_system_library_reads_as_readelf_prints_it() {
        let mut checked = 0;
        let mut tagged = 0;
        // libc carries neither tag; glibc's own gconv modules carry DT_RUNPATH `$ORIGIN`.
        for lib in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
            "/usr/lib/x86_64-linux-gnu/gconv/EUC-KR.so",
            "/usr/lib/x86_64-linux-gnu/gconv/ISO-2022-JP.so",
            "/usr/lib64/gconv/EUC-KR.so",
        ] {
            let p = Path::new(lib);
            if !p.exists() {
                continue;
            }
            let Ok(out) = Command::new("readelf").args(["-d", lib]).output() else {
                eprintln!("no readelf: skipped");
                return;
            };
            let text = String::from_utf8_lossy(&out.stdout);
            let tag = |t: &str| {
                text.lines()
                    .find(|l| l.contains(&format!("({t})")))
                    .and_then(|l| Some(l.split_once('[')?.1.trim_end_matches(']').to_string()))
            };
            let l = read(p).unwrap();
            assert_eq!(l.rpath, tag("RPATH"), "{lib}");
            assert_eq!(l.runpath, tag("RUNPATH"), "{lib}");
            assert_eq!(l.error, None);
            checked += 1;
            tagged += usize::from(!l.tags.is_empty());
        }
        assert!(checked > 0, "no system library to read");
        if Path::new("/usr/lib/x86_64-linux-gnu/gconv/EUC-KR.so").exists() {
            assert!(tagged > 0, "a gconv module's DT_RUNPATH was not read");
        }
    }

    /// Without section headers (the loader never reads them) the segment is still found; a
    /// file cut inside its dynamic segment, or no ELF at all, is an error, never "none".
    #[test]
    fn no_section_headers_reads_and_a_cut_file_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let Some(lib) = shared_lib(
            d.path(),
            "libsh.so",
            &["-Wl,--disable-new-dtags", "-Wl,-rpath,/z"],
        ) else {
            return;
        };
        let mut bytes = std::fs::read(&lib).unwrap();
        // e_shoff, e_shnum and e_shstrndx of an ELF64 header zeroed.
        bytes[0x28..0x30].fill(0);
        bytes[0x3c..0x40].fill(0);
        let stripped = d.path().join("libnosh.so");
        std::fs::write(&stripped, &bytes).unwrap();
        assert_eq!(read(&stripped).unwrap().rpath.as_deref(), Some("/z"));

        let bytes = std::fs::read(&lib).unwrap();
        let whole = read(&lib).unwrap();
        assert_eq!(whole.rpath.as_deref(), Some("/z"));
        // The dynamic segment's file offset, from the program headers (ELF64, little endian).
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap());
        let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
        let dyn_off = (0..phnum as usize)
            .map(|i| phoff + i * phentsize as usize)
            .find(|&p| u32::from_le_bytes(bytes[p..p + 4].try_into().unwrap()) == 2)
            .map(|p| u64_at(p + 8) as usize)
            .unwrap();
        let cut = d.path().join("libcut.so");
        std::fs::write(&cut, &bytes[..dyn_off + 24]).unwrap();
        let e = read(&cut).unwrap_err();
        assert!(matches!(e, LinkageError::Malformed { .. }), "{e}");

        let text = d.path().join("libtext.so");
        std::fs::write(&text, "/* GNU ld script */\nGROUP ( libc.so.6 )\n").unwrap();
        assert!(matches!(
            read(&text).unwrap_err(),
            LinkageError::NotElf { .. }
        ));
        let l = of(&text);
        assert_eq!(l.effective, None);
        assert!(l.error.unwrap().contains("is not an ELF file"));
        assert!(matches!(
            read(&d.path().join("missing.so")).unwrap_err(),
            LinkageError::Open { .. }
        ));
    }
}
