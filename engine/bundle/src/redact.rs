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

use std::sync::LazyLock;

use aorta_recipe::Redaction;
use regex::Regex;

/// The BEGIN and END markers of a private key block, for the stream's state.
static KEY_MARKERS: LazyLock<(Regex, Regex)> = LazyLock::new(|| {
    (
        Regex::new(KEY_BEGIN).expect("marker compiles"),
        Regex::new(KEY_END).expect("marker compiles"),
    )
});

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

/// A value after `KEY=`, `KEY: ` or `"KEY": "`: up to a quote, space, comma, brace,
/// backslash, `&` (a query string's next field, an HTML entity) or `<`; never a placeholder.
const VALUE: &str = r#"(?P<s>[^"'\s\\,}<&][^"'\s\\,}<&]*)"#;
/// `=`, `:` between a key and its value, with the quotes JSON, YAML and HTML (report.html
/// escapes them as `&quot;`, `&#34;`, `&#39;`) put around either.
const SEP: &str =
    r#"(?:["'`]|&quot;|&#34;|&#39;|&#x27;)?\s*[:=]\s*(?:["'`]|&quot;|&#34;|&#39;|&#x27;)?"#;
/// A private key block (PEM, OpenSSH, PGP) opening and closing on one line: in JSON, a
/// multi-line value's newlines are `\n` escapes.
const KEY_BEGIN: &str = r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----";
const KEY_END: &str = r"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----";

/// A secret-named key: one whose name holds one of these words, followed by the end of the
/// name or a separator (`_`, `.`, `-`), in any case and in camelCase: `password`,
/// `db_password`, `my_secret`, `hf_token_lower`, `SecretAccessKey`, `WANDB_API_KEY`; not
/// `max_new_tokens` or `tokenizer`.
const SECRET_KEY: &str = r"(?i)(?:^|[^A-Za-z0-9_.-])(?:[A-Za-z0-9_.-]*?)(?:secret|token|passw(?:or)?d|passphrase|pwd|api_?key|access_?key|private_?key|secret_?key|auth_?key|credentials?|client_?secret)(?:[_.-][A-Za-z0-9_.-]*)?";

/// The keywords of gitleaks' `generic-api-key` rule: a high-entropy value under such a key.
const GENERIC_KEY: &str = r"(?i)(?:^|[^A-Za-z0-9_.-])[A-Za-z0-9_.-]*?(?:access|auth|api|credential|creds|key|secret|token)[A-Za-z0-9_.-]*";

/// Values a secret-named key often has that are not secrets: numbers, booleans, nothing.
fn not_a_plain_value(v: &str) -> bool {
    let l = v.to_ascii_lowercase();
    !(v.bytes()
        .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-')
        || matches!(
            l.as_str(),
            "true" | "false" | "null" | "none" | "yes" | "no" | "on" | "off"
        ))
}

/// Shannon entropy in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// gitleaks' generic rule: at least 16 characters with letters and digits, entropy of 3.5
/// bits or more, not a hex digest (aorta's keys and blake3 sums), not a path.
fn looks_random(v: &str) -> bool {
    v.len() >= 16
        && v.bytes().any(|b| b.is_ascii_digit())
        && v.bytes().any(|b| b.is_ascii_alphabetic())
        && !v.bytes().all(|b| b.is_ascii_hexdigit())
        && !v.starts_with('/')
        && !v.contains("://")
        && entropy(v) >= 3.5
}

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
            // Private keys first: a block on one line, then one that opens here and goes on
            // (its next lines are redacted whole by `redact_stream`).
            rule(
                "private_key",
                &format!(r"(?s){KEY_BEGIN}.*?{KEY_END}"),
                None,
            ),
            rule("private_key", &format!(r"{KEY_BEGIN}[^\r\n]*"), None),
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
                r"\b(?P<s>(?:A3T[A-Z0-9]|AKIA|ASIA|AROA|AIDA|ABIA|ACCA)[A-Z2-7]{16})\b",
                None,
            ),
            rule(
                "aws_secret_access_key",
                &format!(r#"(?i)secret_?access_?key{SEP}(?P<s>[A-Za-z0-9/+=]{{40}})"#),
                None,
            ),
            // gitleaks' rules (config/gitleaks.toml): gcp-api-key, slack-*-token,
            // slack-webhook-url, stripe-access-token, gitlab-*, npm-access-token,
            // pypi-upload-token, jwt, azure-ad-client-secret; Azure storage account keys.
            rule("gcp_api_key", r"\b(?P<s>AIza[0-9A-Za-z_-]{35})", None),
            rule(
                "slack_token",
                r"\b(?P<s>xox[baprse]-[0-9A-Za-z-]{10,})",
                None,
            ),
            rule(
                "slack_webhook",
                r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9+/]{20,})",
                None,
            ),
            rule(
                "stripe_key",
                r"\b(?P<s>(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,99})",
                None,
            ),
            rule(
                "gitlab_token",
                r"\b(?P<s>(?:glpat|gldt|glrt|glptt|glft|glsoat|glcbt|glimt|glagent)-[0-9A-Za-z_-]{20,}|GR1348941[0-9A-Za-z_-]{20,})",
                None,
            ),
            rule("npm_token", r"(?i)\b(?P<s>npm_[a-z0-9]{36})", None),
            rule(
                "pypi_token",
                r"(?P<s>pypi-AgEIcHlwaS5vcmc[0-9A-Za-z_-]{50,})",
                None,
            ),
            rule(
                "azure_secret",
                r"(?:^|[^A-Za-z0-9_~.])(?P<s>[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})",
                None,
            ),
            rule(
                "azure_secret",
                r"(?i)AccountKey=(?P<s>[A-Za-z0-9+/]{86}==)",
                None,
            ),
            rule(
                "bearer_token",
                r"(?i)\b(?:bearer\s+|authorization:\s*token\s+)(?P<s>[A-Za-z0-9._~+/=-]{16,})",
                None,
            ),
            // After bearer_token: a bearer JWT counts as a bearer token.
            rule(
                "jwt",
                r"\b(?P<s>ey[A-Za-z0-9_-]{10,}\.ey[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*)",
                None,
            ),
            rule(
                "url_password",
                r#"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@"'<]+:(?P<s>[^@\s/"'<]+)@"#,
                None,
            ),
            rule(
                "secret_env",
                &format!("{SECRET_KEY}{SEP}{VALUE}"),
                Some(not_a_plain_value),
            ),
            rule(
                "generic_secret",
                &format!(r"{GENERIC_KEY}{SEP}(?P<s>[A-Za-z0-9_=+/.-]{{16,150}})"),
                Some(looks_random),
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
        let mut in_key = false;
        loop {
            line.clear();
            let n =
                io::Read::take(&mut input, MAX_LINE_BYTES as u64).read_until(b'\n', &mut line)?;
            if n == 0 {
                return Ok(written);
            }
            let text = String::from_utf8_lossy(&line);
            let red = self.redact_line(&text, &mut in_key, counts);
            out.write_all(red.as_bytes())?;
            written += red.len() as u64;
        }
    }

    /// One line of a stream. Inside a private key block (a line opened it and none closed it
    /// yet: a PEM file, `SSH_PRIVATE_KEY=-----BEGIN …` in an env dump) the whole line is the
    /// secret, up to and including the END marker.
    fn redact_line(&self, line: &str, in_key: &mut bool, counts: &mut Counts) -> String {
        let mut rest = line;
        let mut out = String::new();
        if *in_key {
            *counts.entry("private_key".into()).or_default() += 1;
            out.push_str("<redacted:private_key>");
            match KEY_MARKERS.1.find(line) {
                Some(m) => {
                    *in_key = false;
                    rest = &line[m.end()..];
                }
                None => {
                    let body = line.trim_end_matches(['\n', '\r']);
                    out.push_str(&line[body.len()..]);
                    return out;
                }
            }
        }
        // A block opens on this line if its last BEGIN has no END after it.
        if let Some(b) = KEY_MARKERS.0.find_iter(rest).last() {
            *in_key = !KEY_MARKERS.1.is_match(&rest[b.end()..]);
        }
        out.push_str(&self.redact_str(rest, counts));
        out
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
