//! Redaction: the rules every text member of a bundle goes through, line by line.
//!
//! Built-in rules are always on and target what leaks from GPU jobs: tokens and keys by their
//! published shapes, bearer tokens, passwords in URLs, values of secret-named variables, and
//! user names (in home paths and `USER`-like variables). A recipe's `redaction` block adds its `scrub_env_keys` globs
//! (values of matching variables), absolute paths and IP addresses; `--redact-hosts` adds
//! private IP addresses and the machine's host names. Only the secret part of a match is
//! replaced, by `<redacted:RULE>`, so JSON and `K=V` lines keep their shape, and a placeholder
//! never matches a rule again (values starting with `<` are skipped).

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::net::{Ipv4Addr, Ipv6Addr};

use aorta_recipe::Redaction;
use regex::Regex;

/// Lines are redacted whole up to this length; a longer line is cut into pieces this long (a
/// secret on a cut may be missed; a GPU log line is never this long).
pub const MAX_LINE_BYTES: usize = 8 << 20;

/// What to redact beyond the built-in rules.
#[derive(Debug, Clone, Default)]
pub struct RedactOptions {
    /// The recipe's `redaction` block, when it has one.
    pub recipe: Option<Redaction>,
    /// Private IP addresses and these host names (the run's env snapshots name them).
    pub hosts: Option<Vec<String>>,
}

/// Redactions per rule name.
pub type Counts = BTreeMap<String, u64>;

/// A rule: `re`'s group `s` (or the whole match) is the secret; `check` can veto a candidate.
struct Rule {
    name: &'static str,
    re: Regex,
    check: Option<fn(&str) -> bool>,
}

/// The compiled rules for one bundle.
pub struct Redactor {
    rules: Vec<Rule>,
}

/// A value after `KEY=`, `KEY: ` or `"KEY": "`: up to a quote, space, comma, brace or
/// backslash; never a placeholder.
const VALUE: &str = r#"(?P<s>[^"'\s\\,}<][^"'\s\\,}]*)"#;
const SEP: &str = r#"["']?\s*[:=]\s*["']?"#;

fn rule(name: &'static str, re: &str, check: Option<fn(&str) -> bool>) -> Rule {
    Rule {
        name,
        re: Regex::new(re).expect("built-in redaction rules compile"),
        check,
    }
}

fn is_ip(s: &str) -> bool {
    s.parse::<Ipv4Addr>().is_ok() || s.parse::<Ipv6Addr>().is_ok()
}

fn is_private_ip(s: &str) -> bool {
    match (s.parse::<Ipv4Addr>(), s.parse::<Ipv6Addr>()) {
        (Ok(v4), _) => v4.is_private() || v4.is_loopback() || v4.is_link_local(),
        (_, Ok(v6)) => v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00,
        _ => false,
    }
}

/// An fnmatch glob (`*`, `?`) over variable names as a regex fragment.
fn glob_regex(glob: &str) -> String {
    glob.chars()
        .map(|c| match c {
            '*' => "[A-Za-z0-9_]*".to_string(),
            '?' => "[A-Za-z0-9_]".to_string(),
            c => regex::escape(&c.to_string()),
        })
        .collect()
}

const IPV4: &str = r"\b(?P<s>(?:\d{1,3}\.){3}\d{1,3})\b";
/// Candidates (hex digits and at least two colons); a parser decides which are addresses.
const IPV6: &str = r"(?i)(?:^|[^0-9a-z:.])(?P<s>[0-9a-f]*:[0-9a-f]*:[0-9a-f:.]*[0-9a-f])";

impl Redactor {
    pub fn new(opts: &RedactOptions) -> Redactor {
        let mut rules = vec![
            rule("hf_token", r"\b(?P<s>hf_[A-Za-z0-9]{30,})\b", None),
            rule(
                "github_token",
                r"\b(?P<s>(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}))\b",
                None,
            ),
            rule(
                "api_key",
                r"\b(?P<s>sk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_-]{20,})",
                None,
            ),
            rule(
                "aws_access_key_id",
                r"\b(?P<s>(?:AKIA|ASIA|AROA|AIDA)[A-Z0-9]{16})\b",
                None,
            ),
            rule(
                "aws_secret_access_key",
                &format!(r#"(?i)aws_?secret_?access_?key{SEP}(?P<s>[A-Za-z0-9/+=]{{40}})"#),
                None,
            ),
            rule(
                "bearer_token",
                r"(?i)\b(?:bearer\s+|authorization:\s*token\s+)(?P<s>[A-Za-z0-9._~+/=-]{16,})",
                None,
            ),
            rule(
                "url_password",
                r#"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@"'<]+:(?P<s>[^@\s/"'<]+)@"#,
                None,
            ),
            rule(
                "secret_env",
                &format!(
                    r"\b[A-Z][A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS)[A-Z0-9_]*{SEP}{VALUE}"
                ),
                None,
            ),
            rule("home_user", r#"/(?:home|Users)/(?P<s>[^/\s"':<]+)"#, None),
            rule(
                "user_name",
                &format!(r"\b(?:USER|LOGNAME|USERNAME|SUDO_USER){SEP}{VALUE}"),
                None,
            ),
        ];
        if let Some(r) = &opts.recipe {
            if !r.scrub_env_keys.is_empty() {
                let keys: Vec<String> = r.scrub_env_keys.iter().map(|g| glob_regex(g)).collect();
                // Every character of a glob is escaped or a class: the regex always compiles.
                let re = format!(r"\b(?:{}){SEP}{VALUE}", keys.join("|"));
                rules.push(rule("env_key", &re, None));
            }
            if r.scrub_paths {
                rules.push(rule(
                    "path",
                    r"(?:^|[^A-Za-z0-9_.<-])(?P<s>/(?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]+)",
                    None,
                ));
            }
            if r.scrub_ip_addresses {
                rules.push(rule("ip_address", IPV4, Some(is_ip)));
                rules.push(rule("ip_address", IPV6, Some(is_ip)));
            }
        }
        if let Some(hosts) = &opts.hosts {
            rules.push(rule("private_ip", IPV4, Some(is_private_ip)));
            rules.push(rule("private_ip", IPV6, Some(is_private_ip)));
            let mut names: Vec<&str> = hosts
                .iter()
                .map(String::as_str)
                .filter(|h| h.len() >= 2 && *h != "localhost")
                .collect();
            names.sort_by_key(|h| std::cmp::Reverse(h.len()));
            names.dedup();
            if !names.is_empty() {
                let alts: Vec<String> = names.iter().map(|h| regex::escape(h)).collect();
                let re = format!(r"(?i)\b(?P<s>(?:{}))\b", alts.join("|"));
                rules.push(Rule {
                    name: "hostname",
                    re: Regex::new(&re).expect("escaped host names compile"),
                    check: None,
                });
            }
        }
        Redactor { rules }
    }

    /// The rule names in use, in the order they apply.
    pub fn rule_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.rules.iter().map(|r| r.name).collect();
        names.dedup();
        names
    }

    /// `text` with every secret replaced; counts are added to `counts`.
    pub fn redact_str(&self, text: &str, counts: &mut Counts) -> String {
        let mut cur = text.to_string();
        for r in &self.rules {
            if !r.re.is_match(&cur) {
                continue;
            }
            let mut out = String::with_capacity(cur.len());
            let mut last = 0;
            let mut n = 0u64;
            for caps in r.re.captures_iter(&cur) {
                let Some(m) = caps.name("s").or_else(|| caps.get(0)) else {
                    continue;
                };
                if r.check.is_some_and(|ok| !ok(m.as_str())) {
                    continue;
                }
                out.push_str(&cur[last..m.start()]);
                out.push_str("<redacted:");
                out.push_str(r.name);
                out.push('>');
                last = m.end();
                n += 1;
            }
            if n > 0 {
                out.push_str(&cur[last..]);
                cur = out;
                *counts.entry(r.name.to_string()).or_default() += n;
            }
        }
        cur
    }

    /// Streams `input` to `out` line by line (UTF-8 decoded with replacement), redacted.
    /// Returns the bytes written.
    pub fn redact_stream(
        &self,
        mut input: impl BufRead,
        mut out: impl Write,
        counts: &mut Counts,
    ) -> io::Result<u64> {
        let mut line = Vec::new();
        let mut written = 0u64;
        loop {
            line.clear();
            let n =
                io::Read::take(&mut input, MAX_LINE_BYTES as u64).read_until(b'\n', &mut line)?;
            if n == 0 {
                return Ok(written);
            }
            let text = String::from_utf8_lossy(&line);
            let red = self.redact_str(&text, counts);
            out.write_all(red.as_bytes())?;
            written += red.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red(opts: &RedactOptions, text: &str) -> (String, Counts) {
        let mut c = Counts::new();
        let out = Redactor::new(opts).redact_str(text, &mut c);
        (out, c)
    }

    #[test]
    fn built_in_rules_replace_only_the_secret() {
        let none = RedactOptions::default();
        let cases = [
            (
                "export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
                "export HF_TOKEN=<redacted:hf_token>",
            ),
            (
                r#"{"OPENAI_API_KEY": "sk-proj-abcdefghijklmnopqrstuvwxyz012345"}"#,
                r#"{"OPENAI_API_KEY": "<redacted:api_key>"}"#,
            ),
            (
                "git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x/y",
                "git clone https://<redacted:github_token>@github.com/x/y",
            ),
            (
                "key id AKIAIOSFODNN7EXAMPLE used",
                "key id <redacted:aws_access_key_id> used",
            ),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key = <redacted:aws_secret_access_key>",
            ),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
                "Authorization: Bearer <redacted:bearer_token>",
            ),
            (
                "pip install --index-url https://bob:s3cr3t-pw@pypi.corp.example/simple",
                "pip install --index-url https://bob:<redacted:url_password>@pypi.corp.example/simple",
            ),
            ("WANDB_API_KEY=0123abcd", "WANDB_API_KEY=<redacted:secret_env>"),
            (
                "File \"/home/alice/train.py\", line 3",
                "File \"/home/<redacted:home_user>/train.py\", line 3",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(red(&none, input).0, want, "{input}");
        }
        // Look-alikes stay: a token count, an ordinary key=value, a short "token".
        for keep in [
            "tokens/s=41230 max_new_tokens=128",
            "step 3 loss=2.5",
            "token ids",
            "skip-connections are fine",
            "cuda:0 12:30:45",
        ] {
            assert_eq!(red(&none, keep).0, keep);
        }
    }

    #[test]
    fn recipe_and_host_rules() {
        let opts = RedactOptions {
            recipe: Some(Redaction {
                scrub_env_keys: vec!["AWS_*".into(), "MY_?".into()],
                scrub_paths: true,
                scrub_ip_addresses: true,
            }),
            hosts: None,
        };
        let (out, c) = red(
            &opts,
            "AWS_REGION=us-east-1 MY_X=1 MY_XY=2 /opt/rocm/lib at 8.8.8.8 and [2001:db8::1]:80 12:30:45",
        );
        assert_eq!(
            out,
            "AWS_REGION=<redacted:env_key> MY_X=<redacted:env_key> MY_XY=2 <redacted:path> at <redacted:ip_address> and [<redacted:ip_address>]:80 12:30:45"
        );
        assert_eq!(c["env_key"], 2);
        assert_eq!(c["ip_address"], 2);
        let hosts = RedactOptions {
            recipe: None,
            hosts: Some(vec!["gpu-node-17".into(), "localhost".into()]),
        };
        let (out, c) = red(
            &hosts,
            "master gpu-node-17.corp:29500 10.1.2.3 8.8.8.8 GPU-NODE-17",
        );
        assert_eq!(
            out,
            "master <redacted:hostname>.corp:29500 <redacted:private_ip> 8.8.8.8 <redacted:hostname>"
        );
        assert_eq!((c["hostname"], c["private_ip"]), (2, 1));
    }

    #[test]
    fn streaming_keeps_lines_and_decodes_invalid_utf8() {
        let r = Redactor::new(&RedactOptions::default());
        let input = b"a HF_TOKEN=x1\nbad \xff byte\nlast line without newline";
        let mut out = Vec::new();
        let mut c = Counts::new();
        let n = r.redact_stream(&input[..], &mut out, &mut c).unwrap();
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "a HF_TOKEN=<redacted:secret_env>\nbad \u{FFFD} byte\nlast line without newline"
        );
        assert_eq!(n, out.len() as u64);
        assert_eq!(c["secret_env"], 1);
    }
}
