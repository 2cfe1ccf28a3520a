//! An agent that plans its work: creating a task plans three named steps,
//! and each executed step does one of them in the task's workspace, ending
//! with a report published as an artifact.
//!
//!  1. count words: counts the words of every file uploaded to the task (or,
//!     if none, of the task's input) into work/counts.tsv;
//!  2. rank words: ranks the ten most frequent into work/top.tsv;
//!  3. write report: writes report.md and publishes it; the last step.
//!
//! A word is a run of ASCII letters and digits, lowercased, so that every
//! language's build of this example gives the same answers: this one answers
//! byte for byte as the Go example (examples/planner/go), down to its error
//! messages. The few places where that takes some of Go's string semantics
//! are in [`gostr`].
//!
//! Build (from the repository root):
//!
//! ```text
//! make build/plugins/planner-rust.wasm
//! ```

use std::collections::BTreeMap;

use agentrt::json::Value;
use agentrt::{workspace, Error, PlannedStep, Step, StepResult, Task};

mod gostr;

fn on_task(_task: &Task) -> Result<Vec<PlannedStep>, Error> {
    agentrt::info("planned 3 steps");
    Ok(vec![
        PlannedStep::new("count words", "Count the words of the uploaded text files"),
        PlannedStep::new("rank words", "Rank the ten most frequent words"),
        PlannedStep::new("write report", "Write report.md and publish it"),
    ])
}

fn on_step(step: &Step) -> Result<StepResult, Error> {
    match step.name.as_str() {
        "count words" => count_words(step),
        "rank words" => rank_words(),
        "write report" => write_report(),
        _ => Ok(StepResult::output("The report is done; nothing left to do.").last()),
    }
}

agentrt::export_agent!(task = on_task, step = on_step);

/// Counts the words of the uploaded files into work/counts.tsv and lists the
/// files in work/sources.txt.
fn count_words(step: &Step) -> Result<StepResult, Error> {
    let files = workspace::list("")?;
    let mut counts = Counts::new();
    let mut sources: Vec<String> = Vec::new();
    let mut total: i64 = 0;
    for f in &files {
        if f.path.starts_with("work/") || f.path == "report.md" {
            continue;
        }
        let text = workspace::read(&f.path)?;
        total += count(&text, &mut counts);
        sources.push(f.path.clone());
    }
    if sources.is_empty() {
        total += count(step.task.input.as_bytes(), &mut counts);
        sources.push("(task input)".to_string());
    }
    workspace::write("work/counts.tsv", counts_tsv(&counts).as_bytes())?;
    workspace::write("work/sources.txt", (sources.join("\n") + "\n").as_bytes())?;
    agentrt::info(&format!(
        "counted {} words in {}",
        total,
        sources.join(", ")
    ));
    Ok(StepResult::output(format!(
        "Counted {} words ({} distinct) in {} files",
        total,
        counts.len(),
        sources.len()
    ))
    // The Go example's map[string]int, which Go encodes with sorted keys.
    .with_additional_output(
        Value::object()
            .with("distinct", counts.len())
            .with("files", sources.len())
            .with("words", total),
    ))
}

/// Word counts by word; a BTreeMap iterates in byte order, as Go's
/// sort.Strings sorts.
type Counts = BTreeMap<String, i64>;

/// Adds the words of `text` to `counts` and returns how many it found.
///
/// The Go example splits `strings.ToLower(text)` at every rune that is not
/// an ASCII lowercase letter or digit. Invalid UTF-8 decodes to U+FFFD, a
/// separator. Only three kinds of runes lowercase into a word's letters:
/// ASCII letters and digits, and (Go's simple case mapping, as a program
/// over every rune shows) U+0130 'İ' to "i" and U+212A KELVIN SIGN to "k".
fn count(text: &[u8], counts: &mut Counts) -> i64 {
    let mut n = 0;
    let mut word = String::new();
    for r in gostr::runes(text) {
        match r.ok().and_then(word_char) {
            Some(c) => word.push(c),
            None if word.is_empty() => {}
            None => {
                *counts.entry(std::mem::take(&mut word)).or_insert(0) += 1;
                n += 1;
            }
        }
    }
    if !word.is_empty() {
        *counts.entry(word).or_insert(0) += 1;
        n += 1;
    }
    n
}

/// What `c` is in a word once lowercased as Go's `strings.ToLower` does, or
/// `None` for a separator.
fn word_char(c: char) -> Option<char> {
    match c {
        'a'..='z' | '0'..='9' => Some(c),
        'A'..='Z' => Some(c.to_ascii_lowercase()),
        '\u{130}' => Some('i'),  // LATIN CAPITAL LETTER I WITH DOT ABOVE
        '\u{212A}' => Some('k'), // KELVIN SIGN
        _ => None,
    }
}

/// work/counts.tsv: a line "word<TAB>count" for each word.
fn counts_tsv(counts: &Counts) -> String {
    let mut tsv = String::new();
    for (word, n) in counts {
        tsv.push_str(&format!("{}\t{}\n", word, n));
    }
    tsv
}

/// A line of work/counts.tsv. A client may upload a work/counts.tsv of its
/// own, so the word is any bytes, as in a Go string.
#[derive(Clone, Debug, PartialEq, Eq)]
struct WordCount {
    word: Vec<u8>,
    count: i64,
}

/// Reads work/counts.tsv.
fn read_counts() -> Result<Vec<WordCount>, Error> {
    match workspace::read("work/counts.tsv") {
        Ok(b) => parse_counts(&b),
        Err(e) if e.is_not_found() => {
            Err("there are no counts yet: the step \"count words\" runs first".into())
        }
        Err(e) => Err(e),
    }
}

/// Parses work/counts.tsv: lines without a tab are skipped; a count is
/// what Go's strconv.Atoi takes (an optional sign and decimal digits that
/// fit an int64), as Rust's i64 parser.
fn parse_counts(b: &[u8]) -> Result<Vec<WordCount>, Error> {
    let mut wcs = Vec::new();
    for line in lines(b) {
        let tab = match line.iter().position(|&c| c == b'\t') {
            Some(i) => i,
            None => continue,
        };
        let (word, n) = (&line[..tab], &line[tab + 1..]);
        let count = std::str::from_utf8(n)
            .ok()
            .and_then(|n| n.parse::<i64>().ok())
            .ok_or_else(|| format!("work/counts.tsv: bad count {}", gostr::quote(n)))?;
        wcs.push(WordCount {
            word: word.to_vec(),
            count,
        });
    }
    Ok(wcs)
}

/// The lines of `b` as Go's `strings.Split(strings.TrimSuffix(b, "\n"), "\n")`
/// gives them (an empty `b` is one empty line).
fn lines(b: &[u8]) -> std::slice::Split<'_, u8, impl FnMut(&u8) -> bool> {
    b.strip_suffix(b"\n").unwrap_or(b).split(|&c| c == b'\n')
}

/// Writes the ten most frequent words to work/top.tsv.
fn rank_words() -> Result<StepResult, Error> {
    let wcs = rank(read_counts()?);
    workspace::write("work/top.tsv", &top_tsv(&wcs))?;
    match wcs.first() {
        None => Ok(StepResult::output("There are no words to rank")),
        Some(top) => Ok(StepResult::output(format!(
            "The most frequent word is '{}' ({} times)",
            gostr::lossy(&top.word),
            top.count
        ))),
    }
}

/// The ten most frequent words: by count, most frequent first, then by word
/// in byte order.
fn rank(mut wcs: Vec<WordCount>) -> Vec<WordCount> {
    wcs.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.word.cmp(&b.word)));
    wcs.truncate(10);
    wcs
}

/// work/top.tsv: a line "rank<TAB>word<TAB>count" for each ranked word.
fn top_tsv(wcs: &[WordCount]) -> Vec<u8> {
    let mut tsv = Vec::new();
    for (i, wc) in wcs.iter().enumerate() {
        tsv.extend_from_slice(format!("{}\t", i + 1).as_bytes());
        tsv.extend_from_slice(&wc.word);
        tsv.extend_from_slice(format!("\t{}\n", wc.count).as_bytes());
    }
    tsv
}

/// Writes report.md from the counts and the ranking and publishes it.
fn write_report() -> Result<StepResult, Error> {
    let wcs = read_counts()?;
    let top = match workspace::read("work/top.tsv") {
        Ok(b) => b,
        Err(e) if e.is_not_found() => {
            return Err("there is no ranking yet: the step \"rank words\" runs first".into())
        }
        Err(e) => return Err(e),
    };
    let sources = workspace::read("work/sources.txt")?;
    workspace::write("report.md", &report(&wcs, &top, &sources))?;
    agentrt::publish_file("report.md", "report.md", "")?;
    Ok(StepResult::output("Wrote report.md").last())
}

/// report.md's text.
fn report(wcs: &[WordCount], top: &[u8], sources: &[u8]) -> Vec<u8> {
    // Go's int wraps around; so does this sum of counts from a file.
    let total = wcs.iter().fold(0i64, |t, wc| t.wrapping_add(wc.count));
    let mut r: Vec<u8> = Vec::new();
    r.extend_from_slice(b"# Word report\n\nSources: ");
    for (i, source) in lines(sources).enumerate() {
        if i > 0 {
            r.extend_from_slice(b", ");
        }
        r.extend_from_slice(source);
    }
    r.extend_from_slice(
        format!(
            "\nWords: {}\nDistinct words: {}\n\n| Rank | Word | Count |\n|---:|---|---:|\n",
            total,
            wcs.len()
        )
        .as_bytes(),
    );
    for line in lines(top).filter(|line| !line.is_empty()) {
        r.extend_from_slice(b"| ");
        for &c in line {
            if c == b'\t' {
                r.extend_from_slice(b" | ");
            } else {
                r.push(c);
            }
        }
        r.extend_from_slice(b" |\n");
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(texts: &[&[u8]]) -> (i64, String) {
        let mut counts = Counts::new();
        let total = texts.iter().map(|t| count(t, &mut counts)).sum();
        (total, counts_tsv(&counts))
    }

    #[test]
    fn plans_three_steps() {
        let steps = on_task(&Task::default()).unwrap();
        let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["count words", "rank words", "write report"]);
    }

    #[test]
    fn has_nothing_to_do_after_the_report() {
        let r = on_step(&Step::default()).unwrap();
        assert_eq!(
            r,
            StepResult::output("The report is done; nothing left to do.").last()
        );
    }

    /// Every rune whose Go lowercase is or holds an ASCII letter or digit,
    /// from a Go program over all runes U+0080...U+10FFFF:
    ///
    /// ```go
    /// for r := rune(0x80); r <= unicode.MaxRune; r++ {
    ///     if l := strings.ToLower(string(r)); strings.ContainsAny(l, "abcdefghijklmnopqrstuvwxyz0123456789") {
    ///         fmt.Printf("U+%04X -> %q\n", r, l)
    ///     }
    /// }
    /// ```
    const GO_NON_ASCII_LOWER: &[(u32, char)] = &[(0x130, 'i'), (0x212A, 'k')];

    #[test]
    fn lowercases_every_rune_as_go() {
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let want = if c.is_ascii_alphanumeric() {
                Some(c.to_ascii_lowercase())
            } else {
                GO_NON_ASCII_LOWER
                    .iter()
                    .find(|&&(r, _)| r == c as u32)
                    .map(|&(_, l)| l)
            };
            assert_eq!(word_char(c), want, "U+{:04X}", c as u32);
        }
    }

    // The cases below are the Go example's answers, from its functions run
    // with Go 1.26 (`count`, and the formatting of counts.tsv).
    #[test]
    fn counts_words_as_go() {
        assert_eq!(
            counted(&[b"the quick brown fox jumps over the lazy dog The DOG"]),
            (
                11,
                "brown\t1\ndog\t2\nfox\t1\njumps\t1\nlazy\t1\nover\t1\nquick\t1\nthe\t3\n".into()
            )
        );
        assert_eq!(counted(&[b""]), (0, "".into()));
        assert_eq!(counted(&[b" \t\r\n.,;"]), (0, "".into()));
        assert_eq!(
            counted(&["Ünïcödé İstanbul KELVIN \u{212A} naïve x2 2X ﬁne Ǆ ǅ".as_bytes()]),
            (
                11,
                "2x\t1\nc\t1\nd\t1\nistanbul\t1\nk\t1\nkelvin\t1\nn\t1\nna\t1\nne\t1\nve\t1\nx2\t1\n"
                    .into()
            )
        );
        assert_eq!(
            counted(&[
                b"a\xffb\xe2\x84\xaaz \xc4\xb0\xc4 \xe2\x84x\r\nY-y_y",
                b"\xc4\xb0"
            ]),
            (8, "a\t1\nbkz\t1\ni\t2\nx\t1\ny\t3\n".into())
        );
    }

    #[test]
    fn ranks_by_count_then_word() {
        let wcs = parse_counts(
            b"a\t1\nb\t3\nc\t3\nd\t2\ne\t1\nf\t1\ng\t1\nh\t1\ni\t1\nj\t1\nk\t1\nl\t1\n",
        )
        .unwrap();
        let top = rank(wcs);
        assert_eq!(
            String::from_utf8(top_tsv(&top)).unwrap(),
            "1\tb\t3\n2\tc\t3\n3\td\t2\n4\ta\t1\n5\te\t1\n6\tf\t1\n7\tg\t1\n8\th\t1\n9\ti\t1\n10\tj\t1\n"
        );
    }

    #[test]
    fn parses_counts_as_go() {
        let wcs = parse_counts(b"no tab\n\nx\t+7\ny\t-2\tz\n").unwrap_err();
        assert_eq!(wcs.message(), "work/counts.tsv: bad count \"-2\\tz\"");
        let wcs = parse_counts(b"no tab\n\nx\t+7\n\t-0\n\xff\t007\n").unwrap();
        assert_eq!(
            wcs,
            [
                WordCount {
                    word: b"x".to_vec(),
                    count: 7
                },
                WordCount {
                    word: b"".to_vec(),
                    count: 0
                },
                WordCount {
                    word: b"\xff".to_vec(),
                    count: 7
                },
            ]
        );
        assert_eq!(parse_counts(b"").unwrap(), []);
        for (n, want) in [
            (&b""[..], r#""""#),
            (b"+", r#""+""#),
            (b"1_000", r#""1_000""#),
            (b" 1", r#"" 1""#),
            (b"9223372036854775808", r#""9223372036854775808""#),
            (b"3\r", r#""3\r""#),
            (b"\xe2\x84 \xc4\xb0", r#""\xe2\x84 İ""#),
            (b"0x10", r#""0x10""#),
            ("١".as_bytes(), r#""١""#),
        ] {
            let mut line = b"w\t".to_vec();
            line.extend_from_slice(n);
            assert_eq!(
                parse_counts(&line).unwrap_err().message(),
                format!("work/counts.tsv: bad count {}", want)
            );
        }
        assert_eq!(
            parse_counts(b"w\t-9223372036854775808\n").unwrap()[0].count,
            i64::MIN
        );
    }

    #[test]
    fn writes_the_report_as_go() {
        let wcs = parse_counts(b"a\t2\nb\t1\n").unwrap();
        let top = top_tsv(&rank(wcs.clone()));
        let r = report(&wcs, &top, b"in/a.txt\nin/b.txt\n");
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "# Word report\n\nSources: in/a.txt, in/b.txt\nWords: 3\nDistinct words: 2\n\n\
             | Rank | Word | Count |\n|---:|---|---:|\n| 1 | a | 2 |\n| 2 | b | 1 |\n"
        );
        let r = report(&[], b"", b"");
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "# Word report\n\nSources: \nWords: 0\nDistinct words: 0\n\n\
             | Rank | Word | Count |\n|---:|---|---:|\n"
        );
        let wcs = parse_counts(b"x\t9223372036854775807\ny\t2\n").unwrap();
        let r = report(&wcs, b"1\tx\n\n\t\n", b"\n\n");
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "# Word report\n\nSources: , \nWords: -9223372036854775807\nDistinct words: 2\n\n\
             | Rank | Word | Count |\n|---:|---|---:|\n| 1 | x |\n|  |  |\n"
        );
    }
}
