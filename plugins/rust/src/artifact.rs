use crate::error::Error;
use crate::host;
use crate::json::Value;

/// Publishes `data` as an artifact of the task, named `file_name` (a plain
/// name, no `/`) in the directory `relative_path` ("" for the root), and
/// returns its id.
///
/// Created by the step handler, the artifact is linked to the step. It
/// appears only if the handler succeeds.
pub fn create_artifact(file_name: &str, relative_path: &str, data: &[u8]) -> Result<String, Error> {
    host::artifact_create(meta(file_name, relative_path, None).as_bytes(), data)
}

/// Publishes the workspace file at `workspace_path` as an artifact named
/// `file_name` in the directory `relative_path`, and returns its id: like
/// [`create_artifact`] for a file already written with
/// [`workspace::write`](crate::workspace::write), without copying it through
/// the plugin's memory.
pub fn publish_file(
    workspace_path: &str,
    file_name: &str,
    relative_path: &str,
) -> Result<String, Error> {
    host::artifact_create(
        meta(file_name, relative_path, Some(workspace_path)).as_bytes(),
        &[],
    )
}

/// Publishes `uri` as a URI artifact of the task: a reference, which
/// agentrt records and never fetches, of a scheme the agent may produce
/// (its manifest's `capabilities.artifact_schemes.output`). A `file_name`
/// of "" names it after the URI's last path segment. Returns its id;
/// created by the step handler, it is linked to the step.
pub fn create_uri_artifact(
    uri: &str,
    file_name: &str,
    relative_path: &str,
) -> Result<String, Error> {
    let mut m = Value::object().with("file_name", file_name);
    if !relative_path.is_empty() {
        m.insert("relative_path", relative_path);
    }
    m.insert("uri", uri);
    host::artifact_create(m.to_json().as_bytes(), &[])
}

/// The meta message of `artifact_create`.
fn meta(file_name: &str, relative_path: &str, workspace_path: Option<&str>) -> String {
    let mut m = Value::object().with("file_name", file_name);
    if !relative_path.is_empty() {
        m.insert("relative_path", relative_path);
    }
    if let Some(path) = workspace_path {
        m.insert("workspace_path", path);
    }
    m.to_json()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fake;
    use crate::{workspace, ErrorCode};

    #[test]
    fn creates_artifacts() {
        fake::begin("{}");
        let id = create_artifact("out.txt", "", b"Washington").unwrap();
        assert_eq!(id, "00000000-0000-4000-8000-000000000001");
        assert_eq!(id.len(), 36);
        create_artifact("r \"1\".md", "docs/x", b"").unwrap();
        workspace::write("work/report.md", b"# report").unwrap();
        publish_file("work/report.md", "report.md", "out").unwrap();
        let artifacts = fake::with(|s| s.artifacts.clone());
        assert_eq!(
            artifacts,
            vec![
                (r#"{"file_name":"out.txt"}"#.to_string(), b"Washington".to_vec()),
                (r#"{"file_name":"r \"1\".md","relative_path":"docs/x"}"#.to_string(), Vec::new()),
                (
                    r#"{"file_name":"report.md","relative_path":"out","workspace_path":"work/report.md"}"#.to_string(),
                    b"# report".to_vec()
                ),
            ]
        );
    }

    #[test]
    fn creates_uri_artifacts() {
        fake::begin("{}");
        create_uri_artifact("s3://b/r.pdf", "", "links").unwrap();
        let artifacts = fake::with(|s| s.artifacts.clone());
        assert_eq!(
            artifacts,
            vec![(
                r#"{"file_name":"","relative_path":"links","uri":"s3://b/r.pdf"}"#.to_string(),
                Vec::new()
            )]
        );
    }

    #[test]
    fn reports_refused_artifacts() {
        fake::begin("{}");
        let e = create_artifact("a/b.txt", "", b"x").unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::BadPath));
        assert_eq!(
            e.message(),
            "artifact_create: file name \"a/b.txt\" is not a plain name; put directories in relative_path"
        );
        let e = publish_file("missing", "m.txt", "").unwrap_err();
        assert!(e.is_not_found());
    }
}
