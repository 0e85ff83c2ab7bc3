//! Redis 7.0 parameters tally accepts but does not act on: tuning of
//! machinery tally does not have (the defragmenter, lazy freeing, eviction,
//! incremental rehashing, CPU pinning, streams, HyperLogLog) or has in
//! another form. Config files written for Redis, tools that read them back
//! and clients that set them at start work unchanged: each value is checked
//! as Redis checks it (its ranges and error texts) and CONFIG GET shows it
//! as Redis would. Each row in the directive table says why the value
//! changes nothing here, and docs/compatibility.md lists them.
//!
//! A parameter whose silent acceptance would mislead (one that promises a
//! pid file, a log file, syslog, a Unix socket or a wait for replicas at
//! shutdown) is not here: it is honoured in full (as keyspace notifications
//! and `shutdown-on-sigterm` are) or stays refused, with the reason in
//! docs/compatibility.md.

use super::values::{redis_number, Range};

fn one(values: &[String]) -> Result<&str, String> {
    match values {
        [value] => Ok(value.as_str()),
        _ => Err("wrong number of arguments".to_string()),
    }
}

/// yes or no, shown lower-case.
pub(super) fn yes_no(values: &[String]) -> Result<String, String> {
    match one(values)?.to_ascii_lowercase().as_str() {
        value @ ("yes" | "no") => Ok(value.to_string()),
        _ => Err("argument must be 'yes' or 'no'".to_string()),
    }
}

/// `activedefrag`: only `no`, refused as a Redis built without its own
/// jemalloc refuses `yes` (Debian's, for one).
pub(super) fn no_defragmenter(values: &[String]) -> Result<String, String> {
    match yes_no(values)?.as_str() {
        "no" => Ok("no".to_string()),
        _ => Err("Active defragmentation cannot be enabled: it requires a Redis server compiled with \
                  a modified Jemalloc like the one shipped by default with the Redis source distribution"
            .to_string()),
    }
}

/// A number in `range`, shown as read.
pub(super) fn int(values: &[String], range: Range) -> Result<String, String> {
    redis_number(one(values)?, false, range).map(|n| n.to_string())
}

/// A memory amount in `range`, shown in bytes.
pub(super) fn bytes(values: &[String], range: Range) -> Result<String, String> {
    redis_number(one(values)?, true, range).map(|n| n.to_string())
}

/// One of `names` (any case), shown as named.
pub(super) fn one_of(values: &[String], names: &[&str]) -> Result<String, String> {
    let value = one(values)?;
    names
        .iter()
        .find(|name| name.eq_ignore_ascii_case(value))
        .map(|name| name.to_string())
        .ok_or_else(|| {
            format!(
                "argument(s) must be one of the following: {}",
                names.join(", ")
            )
        })
}

/// `oom-score-adj`: no, yes, relative (Redis's other name for yes, shown
/// as yes) or absolute.
pub(super) fn oom_score_adj(values: &[String]) -> Result<String, String> {
    let value = one_of(values, &["no", "yes", "relative", "absolute"])?;
    Ok(if value == "relative" {
        "yes".to_string()
    } else {
        value
    })
}

/// A memory amount or a percentage of `maxmemory` (`maxmemory-clients`),
/// read as Redis reads a MEMORY_CONFIG | PERCENT_CONFIG value: a
/// percentage shown with its `%`, at most `max_percent`.
pub(super) fn memory_or_percent(values: &[String], max_percent: i64) -> Result<String, String> {
    let value = one(values)?;
    if let Some(bytes) = super::values::memtoull(value) {
        // Redis keeps the amount signed: past its range it reads as a
        // percentage, which the bound then refuses.
        if (bytes as i64) < -max_percent {
            return Err(format!(
                "percentage argument must be less or equal to {max_percent}"
            ));
        }
        return Ok(bytes.to_string());
    }
    let percent = value
        .strip_suffix('%')
        .filter(|digits| !digits.is_empty())
        .and_then(|digits| crate::number::parse_i64(digits.as_bytes()))
        .filter(|p| *p >= 0)
        .ok_or("argument must be a memory or percent value")?;
    if percent > max_percent {
        return Err(format!(
            "percentage argument must be less or equal to {max_percent}"
        ));
    }
    Ok(format!("{percent}%"))
}

/// `oom-score-adj-values`: three scores in -2000..=2000, given as three
/// words (a file, the command line) or one (CONFIG SET), shown as one.
pub(super) fn oom_score_adj_values(values: &[String]) -> Result<String, String> {
    let words: Vec<&str> = values.iter().flat_map(|v| v.split_whitespace()).collect();
    if words.len() != 3 {
        return Err("wrong number of arguments".to_string());
    }
    let scores = words
        .iter()
        .map(|w| w.parse::<i64>().ok().filter(|n| (-2000..=2000).contains(n)))
        .collect::<Option<Vec<i64>>>()
        .ok_or("Invalid oom-score-adj-values, elements must be between -2000 and 2000.")?;
    Ok(scores
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(" "))
}

/// Any text.
pub(super) fn text(values: &[String]) -> Result<String, String> {
    one(values).map(str::to_string)
}

/// `proc-title-template`: checked as Redis's validateProcTitleTemplate
/// checks it (tally's process title stays the binary's): every `{name}`
/// must be one of Redis's variables, `{{` is a literal brace, and the
/// title the template makes with an empty `{title}` must not be blank.
/// `cluster` and `unixsocket` are the server's, as Redis expands them.
pub(super) fn proc_title_template(
    values: &[String],
    cluster: bool,
    unixsocket: &str,
) -> Result<String, String> {
    let template = one(values)?;
    let invalid = || "template format is invalid or contains unknown variables".to_string();
    let mut title = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        title.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return Err(invalid());
        }
        if let Some(quoted) = after.strip_prefix('{') {
            title.push('{');
            rest = quoted;
            continue;
        }
        let close = after.find('}').ok_or_else(invalid)?;
        let value = match &after[..close] {
            "title" => "",
            // These always expand to something.
            "listen-addr" | "port" | "tls-port" | "config-file" => "-",
            "server-mode" if cluster => "[cluster]",
            "server-mode" => "",
            "unixsocket" => unixsocket,
            _ => return Err(invalid()),
        };
        title.push_str(value);
        rest = &after[close + 1..];
    }
    title.push_str(rest);
    if title.trim_matches(' ').is_empty() {
        return Err(invalid());
    }
    Ok(template.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(value: &str) -> Vec<String> {
        vec![value.to_string()]
    }

    #[test]
    fn values_are_checked_and_shown_as_redis_does() {
        assert_eq!(yes_no(&v("YES")), Ok("yes".to_string()));
        assert_eq!(
            yes_no(&v("maybe")),
            Err("argument must be 'yes' or 'no'".to_string())
        );
        assert_eq!(int(&v("25"), Range::Signed(1, 99)), Ok("25".to_string()));
        assert_eq!(
            int(&v("100"), Range::Signed(1, 99)),
            Err("argument must be between 1 and 99 inclusive".to_string())
        );
        assert_eq!(
            bytes(&v("1mb"), Range::Signed(1, i64::MAX)),
            Ok("1048576".to_string())
        );
        assert_eq!(
            one_of(&v("Clients"), &["no", "yes", "clients"]),
            Ok("clients".to_string())
        );
        assert_eq!(
            one_of(&v("x"), &["no", "yes"]),
            Err("argument(s) must be one of the following: no, yes".to_string())
        );
        assert_eq!(text(&[]), Err("wrong number of arguments".to_string()));
        assert_eq!(
            oom_score_adj_values(&v("100 50 800")),
            Ok("100 50 800".to_string())
        );
        assert_eq!(
            oom_score_adj_values(&["-2000".into(), "0".into(), "2000".into()]),
            Ok("-2000 0 2000".to_string())
        );
        assert_eq!(
            oom_score_adj_values(&v("0 200")),
            Err("wrong number of arguments".to_string())
        );
        assert_eq!(
            oom_score_adj_values(&v("a b c")),
            Err(
                "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
                    .to_string()
            )
        );
        assert_eq!(
            oom_score_adj_values(&v("0 200 3000")),
            Err(
                "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
                    .to_string()
            )
        );
        assert_eq!(memory_or_percent(&v("1mb"), 100), Ok("1048576".to_string()));
        assert_eq!(memory_or_percent(&v("50%"), 100), Ok("50%".to_string()));
        assert_eq!(
            memory_or_percent(&v("200%"), 100),
            Err("percentage argument must be less or equal to 100".to_string())
        );
        assert_eq!(
            memory_or_percent(&v("x%"), 100),
            Err("argument must be a memory or percent value".to_string())
        );
    }

    #[test]
    fn a_process_title_template_is_checked_as_redis_checks_it() {
        let check = |t: &str, cluster: bool, socket: &str| {
            proc_title_template(&[t.to_string()], cluster, socket).is_ok()
        };
        assert!(check("{title} {listen-addr} {server-mode}", false, ""));
        assert!(check("{{title}}x", false, ""));
        assert!(check("x}", false, ""));
        for invalid in [
            "{title}",
            "{foo}",
            "{title",
            "{",
            "",
            "  ",
            "{server-mode}",
            "{unixsocket}",
        ] {
            assert!(!check(invalid, false, ""), "{invalid:?}");
        }
        assert!(check("{server-mode}", true, ""), "[cluster] is a title");
        assert!(check("{unixsocket}", false, "/tmp/s"));
    }
}
