//! The skills extension over real HTTP, served from a real directory: the
//! capability, `skills/list` and `skills/get` with digests and sizes that match
//! the bytes `resources/read` returns, `resources/directory/read` with
//! pagination, `-32602` for URIs it does not serve, nothing outside the root
//! (symbolic links out of it, traversal, encoded separators and invalid
//! escapes), a change on disk reaching a listen stream, and a skill whose files
//! are produced at read time (`"resources": "dynamic"`).

mod common;

use std::path::Path;
use std::time::Duration;

use common::{call, listen};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::suite::{Skill, Skills};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

const SUB_ID: &str = "io.modelcontextprotocol/subscriptionId";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A fresh directory under the target's temp dir.
fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("genmcp-skills-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const PDF_MD: &str = "---\nname: pdf-processing\ndescription: Extract PDFs\nmetadata:\n  version: \"1.0\"\n---\n# PDF\n";

/// root/pdf-processing/{SKILL.md, references/FORMS.md, templates/{a,b,c}.md,
/// templates/regional/eu.md} and root/acme/billing/refunds/SKILL.md.
fn skills_dir(name: &str) -> std::path::PathBuf {
    let root = tempdir(name);
    write(&root.join("pdf-processing/SKILL.md"), PDF_MD);
    write(&root.join("pdf-processing/references/FORMS.md"), "forms\n");
    for t in ["a", "b", "c"] {
        write(
            &root.join(format!("pdf-processing/templates/{t}.md")),
            &format!("template {t}\n"),
        );
    }
    write(
        &root.join("pdf-processing/templates/regional/eu.md"),
        "eu\n",
    );
    write(
        &root.join("acme/billing/refunds/SKILL.md"),
        "---\nname: refunds\ndescription: Refunds\n---\n",
    );
    root
}

fn serve(skills: Skills, page_size: usize) -> ServerThread {
    ServerThread::spawn(
        move || {
            let catalog = Catalog::new();
            Suite::builder(Implementation::new("skills-test", "1.0.0"))
                .catalog(catalog.clone())
                .page_size(page_size)
                .skills(skills)
                .subscriptions(CatalogSubscriptions::new(&catalog))
                .build()
        },
        common::probe::config(),
    )
    .expect("server starts")
}

fn digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

fn result(srv: &ServerThread, method: &str, params: Value) -> Value {
    let body = call(srv.addr, json!(1), method, params).json();
    assert!(body.get("error").is_none(), "{method}: {body}");
    body["result"].clone()
}

fn error_code(srv: &ServerThread, method: &str, params: Value) -> Value {
    call(srv.addr, json!(1), method, params).json()["error"]["code"].clone()
}

#[test]
fn a_directory_is_listed_with_digests_that_match_what_is_read() {
    let root = skills_dir("list");
    let skills = Skills::from_dir(&root).unwrap().directory_read(true);
    let srv = serve(skills, 500);

    let discover = result(&srv, "server/discover", json!({}));
    let caps = &discover["capabilities"];
    assert_eq!(
        caps["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true})
    );
    assert!(
        caps["resources"].is_object(),
        "resources is declared: {caps}"
    );

    let list = result(&srv, "skills/list", json!({}));
    assert!(list["ttlMs"].is_u64() && list["cacheScope"].is_string());
    let entries = list["skills"].as_array().unwrap();
    let uris: Vec<&str> = entries.iter().map(|e| e["uri"].as_str().unwrap()).collect();
    assert_eq!(
        uris,
        [
            "skill://acme/billing/refunds/SKILL.md",
            "skill://pdf-processing/SKILL.md"
        ]
    );
    let pdf = &entries[1];
    assert_eq!(
        pdf["frontmatter"],
        json!({"name": "pdf-processing", "description": "Extract PDFs", "metadata": {"version": "1.0"}})
    );
    let resources = pdf["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 6, "every file once: {resources:?}");
    for r in resources {
        let uri = r["uri"].as_str().unwrap();
        let rel = uri.strip_prefix("skill://").unwrap();
        let bytes = std::fs::read(root.join(rel)).unwrap();
        assert_eq!(r["digest"], digest(&bytes), "{uri}");
        assert_eq!(r["size"], bytes.len(), "{uri}");
        let read = result(&srv, "resources/read", json!({"uri": uri}));
        assert_eq!(
            read["contents"][0]["text"].as_str().unwrap().as_bytes(),
            bytes
        );
    }

    let get = result(
        &srv,
        "skills/get",
        json!({"uri": "skill://pdf-processing/SKILL.md"}),
    );
    assert_eq!(&get["skill"], pdf);
    assert!(get.get("nextCursor").is_none());
    assert!(get["ttlMs"].is_u64() && get["cacheScope"].is_string());

    // Each SKILL.md is a listed resource, named and described by its front matter.
    let listed = result(&srv, "resources/list", json!({}));
    assert!(listed["resources"].as_array().unwrap().contains(&json!({
        "uri": "skill://pdf-processing/SKILL.md", "name": "pdf-processing",
        "description": "Extract PDFs", "mimeType": "text/markdown", "size": PDF_MD.len()
    })));
}

#[test]
fn unknown_uris_are_invalid_params() {
    let root = skills_dir("unknown");
    let srv = serve(Skills::from_dir(&root).unwrap().directory_read(true), 500);
    for uri in [
        "skill://nope/SKILL.md",
        "skill://pdf-processing/references/FORMS.md",
        "skill://pdf-processing",
        "file:///etc/passwd",
    ] {
        assert_eq!(
            error_code(&srv, "skills/get", json!({"uri": uri})),
            -32602,
            "{uri}"
        );
    }
    assert_eq!(
        error_code(
            &srv,
            "resources/read",
            json!({"uri": "skill://pdf-processing/nope.md"})
        ),
        -32602
    );
    for uri in [
        "skill://pdf-processing/SKILL.md",
        "skill://nope",
        "skill://pdf-processing/templates/a.md",
    ] {
        assert_eq!(
            error_code(&srv, "resources/directory/read", json!({"uri": uri})),
            -32602,
            "{uri} is not a directory"
        );
    }
}

#[test]
fn directory_reads_list_direct_children_page_by_page() {
    let root = skills_dir("dirs");
    let srv = serve(Skills::from_dir(&root).unwrap().directory_read(true), 2);
    let mut children = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..10 {
        let mut params = json!({"uri": "skill://pdf-processing/templates"});
        if let Some(c) = &cursor {
            params["cursor"] = c.clone();
        }
        let page = result(&srv, "resources/directory/read", params);
        children.extend(page["resources"].as_array().unwrap().iter().cloned());
        match page.get("nextCursor") {
            Some(c) => cursor = Some(c.clone()),
            None => break,
        }
    }
    let seen: Vec<(&str, &str)> = children
        .iter()
        .map(|c| (c["uri"].as_str().unwrap(), c["mimeType"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("skill://pdf-processing/templates/a.md", "text/markdown"),
            ("skill://pdf-processing/templates/b.md", "text/markdown"),
            ("skill://pdf-processing/templates/c.md", "text/markdown"),
            (
                "skill://pdf-processing/templates/regional",
                "inode/directory"
            ),
        ]
    );
    // A cursor of one directory is refused for another.
    let first = result(
        &srv,
        "resources/directory/read",
        json!({"uri": "skill://pdf-processing/templates"}),
    );
    assert_eq!(
        error_code(
            &srv,
            "resources/directory/read",
            json!({"uri": "skill://pdf-processing", "cursor": first["nextCursor"]})
        ),
        -32602
    );
    // The prefix directories of a nested skill path are directories too.
    let acme = result(
        &srv,
        "resources/directory/read",
        json!({"uri": "skill://acme"}),
    );
    assert_eq!(
        acme["resources"],
        json!([{"uri": "skill://acme/billing", "name": "billing", "mimeType": "inode/directory"}])
    );
}

#[test]
fn without_directory_read_the_method_is_not_found() {
    let root = skills_dir("nodir");
    let srv = serve(Skills::from_dir(&root).unwrap(), 500);
    let r = call(
        srv.addr,
        json!(1),
        "resources/directory/read",
        json!({"uri": "skill://pdf-processing"}),
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], -32601);
    let discover = result(&srv, "server/discover", json!({}));
    assert_eq!(
        discover["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({})
    );
}

#[cfg(unix)]
#[test]
fn symbolic_links_out_of_the_root_are_not_served() {
    let base = tempdir("links");
    let root = base.join("skills");
    let outside = base.join("outside");
    write(&outside.join("secret.txt"), "TOP SECRET\n");
    write(&outside.join("dir/more.txt"), "MORE SECRET\n");
    write(
        &root.join("evil/SKILL.md"),
        "---\nname: evil\ndescription: e\n---\n",
    );
    write(&root.join("evil/inside.md"), "inside\n");
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("evil/leak.md")).unwrap();
    std::os::unix::fs::symlink(outside.join("dir"), root.join("evil/linked")).unwrap();
    // A link inside the root to a file inside the root is served.
    std::os::unix::fs::symlink(root.join("evil/inside.md"), root.join("evil/alias.md")).unwrap();
    let srv = serve(Skills::from_dir(&root).unwrap().directory_read(true), 500);

    let get = result(&srv, "skills/get", json!({"uri": "skill://evil/SKILL.md"}));
    let uris: Vec<&str> = get["skill"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "skill://evil/SKILL.md",
            "skill://evil/alias.md",
            "skill://evil/inside.md"
        ]
    );
    for uri in ["skill://evil/leak.md", "skill://evil/linked/more.txt"] {
        let body = call(srv.addr, json!(2), "resources/read", json!({"uri": uri})).json();
        assert_eq!(body["error"]["code"], -32602, "{uri}: {body}");
        assert!(!body.to_string().contains("SECRET"));
    }
    let dir = result(
        &srv,
        "resources/directory/read",
        json!({"uri": "skill://evil"}),
    );
    assert!(!dir.to_string().contains("leak") && !dir.to_string().contains("linked"));
}

#[test]
fn traversal_encoded_separators_and_invalid_escapes_name_nothing() {
    let base = tempdir("traversal");
    let root = base.join("skills");
    write(&base.join("secret.txt"), "TOP SECRET\n");
    write(
        &root.join("a/SKILL.md"),
        "---\nname: a\ndescription: a\n---\n",
    );
    write(&root.join("a/sub/file.md"), "file\n");
    // A dynamic skill serving a directory of its own the way a producer
    // naturally would (joining the path it is given): only the URI checks
    // keep `..` from reaching the file system through it.
    let files = base.join("files");
    write(&files.join("today.md"), "today\n");
    let skills = Skills::from_dir(&root).unwrap().directory_read(true);
    skills
        .add(
            Skill::new("docs")
                .file("SKILL.md", "---\nname: docs\ndescription: d\n---\n")
                .dynamic(move |path: String| {
                    let read = std::fs::read(files.join(path)).ok();
                    async move { Ok(read) }
                }),
        )
        .unwrap();
    let srv = serve(skills, 500);
    let today = result(
        &srv,
        "resources/read",
        json!({"uri": "skill://docs/today.md"}),
    );
    assert_eq!(today["contents"][0]["text"], "today\n");
    for uri in [
        "skill://docs/../secret.txt",
        "skill://docs/%2e%2e/secret.txt",
        "skill://docs/%2E%2E%2Fsecret.txt",
        "skill://docs/./../secret.txt",
        "skill://a/../secret.txt",
        "skill://a/../../secret.txt",
        "skill://a/%2e%2e/%2e%2e/secret.txt",
        "skill://a/sub/../SKILL.md",
        "skill://a/./SKILL.md",
        "skill://a%2FSKILL.md",
        "skill://a/sub%2ffile.md",
        "skill://a/sub%5cfile.md",
        "skill://a//SKILL.md",
        "skill://a/%zz",
        "skill://a/SKILL.md%",
        "skill://a/SKILL.md%00",
    ] {
        for method in ["resources/read", "skills/get", "resources/directory/read"] {
            let body = call(srv.addr, json!(3), method, json!({"uri": uri})).json();
            assert!(
                !body.to_string().contains("SECRET"),
                "{method} {uri}: {body}"
            );
            assert_eq!(body["error"]["code"], -32602, "{method} {uri}: {body}");
        }
    }
}

#[test]
fn a_change_on_disk_is_served_with_new_digests_and_told_to_listeners() {
    let root = skills_dir("change");
    let skills = Skills::from_dir(&root).unwrap();
    let srv = serve(skills.clone(), 500);
    let mut stream = listen(srv.addr, json!("sk"), json!({"resourcesListChanged": true}));
    stream.set_timeout(Duration::from_secs(5));
    let ack = stream.next_message().unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");

    // Nothing changed: nothing to serve anew, nothing told.
    assert!(!skills.reload().unwrap());

    write(
        &root.join("pdf-processing/references/FORMS.md"),
        "forms v2\n",
    );
    write(&root.join("pdf-processing/NEW.md"), "new\n");
    assert!(skills.reload().unwrap());
    let n = stream.next_message().unwrap();
    assert_eq!(n["method"], "notifications/resources/list_changed");
    assert_eq!(n["params"]["_meta"][SUB_ID], "sk");

    let get = result(
        &srv,
        "skills/get",
        json!({"uri": "skill://pdf-processing/SKILL.md"}),
    );
    let resources = get["skill"]["resources"].as_array().unwrap();
    let forms = resources
        .iter()
        .find(|r| r["uri"] == "skill://pdf-processing/references/FORMS.md")
        .unwrap();
    assert_eq!(forms["digest"], digest(b"forms v2\n"));
    assert!(
        resources
            .iter()
            .any(|r| r["uri"] == "skill://pdf-processing/NEW.md")
    );
    let read = result(
        &srv,
        "resources/read",
        json!({"uri": "skill://pdf-processing/references/FORMS.md"}),
    );
    assert_eq!(read["contents"][0]["text"], "forms v2\n");

    // A skill whose SKILL.md loses its name is no longer served.
    write(
        &root.join("acme/billing/refunds/SKILL.md"),
        "---\ndescription: no name\n---\n",
    );
    assert!(skills.reload().unwrap());
    assert_eq!(
        stream.next_message().unwrap()["method"],
        "notifications/resources/list_changed"
    );
    assert_eq!(skills.uris(), ["skill://pdf-processing/SKILL.md"]);
}

#[test]
fn a_dynamic_skill_produces_its_files_when_they_are_read() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const ON_CALL_MD: &str =
        "---\nname: on-call\ndescription: Who is on call\n---\nRead roster/today.md\n";
    let root = skills_dir("dynamic");
    let skills = Skills::from_dir(&root).unwrap().directory_read(true);
    let reads = Arc::new(AtomicUsize::new(0));
    let asked = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (r, a) = (reads.clone(), asked.clone());
    skills
        .add(
            Skill::new("on-call")
                .file("SKILL.md", ON_CALL_MD)
                .file("static.md", "fixed\n")
                .dynamic(move |path: String| {
                    let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                    a.lock().unwrap().push(path.clone());
                    async move {
                        match path.as_str() {
                            "roster/today.md" => Ok(Some(format!("read {n}: Alice").into_bytes())),
                            "badge.bin" => Ok(Some(vec![0xff, 0x00, 0xfe])),
                            "broken.md" => Err(McpError::internal("the roster is unavailable")),
                            _ => Ok(None),
                        }
                    }
                }),
        )
        .unwrap();
    let srv = serve(skills, 500);

    // The entry lists no file: its resources are "dynamic".
    let list = result(&srv, "skills/list", json!({}));
    let entry = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == "skill://on-call/SKILL.md")
        .expect("the dynamic skill is listed")
        .clone();
    assert_eq!(entry["resources"], "dynamic");
    assert_eq!(
        entry["frontmatter"],
        json!({"name": "on-call", "description": "Who is on call"})
    );
    let get = result(
        &srv,
        "skills/get",
        json!({"uri": "skill://on-call/SKILL.md"}),
    );
    assert_eq!(get["skill"], entry);
    // The directory's skills keep their digested entries.
    let pdf = result(
        &srv,
        "skills/get",
        json!({"uri": "skill://pdf-processing/SKILL.md"}),
    );
    assert!(pdf["skill"]["resources"].is_array());

    // Files given up front are served as given, without the producer.
    let md = result(
        &srv,
        "resources/read",
        json!({"uri": "skill://on-call/SKILL.md"}),
    );
    assert_eq!(md["contents"][0]["text"], ON_CALL_MD);
    let fixed = result(
        &srv,
        "resources/read",
        json!({"uri": "skill://on-call/static.md"}),
    );
    assert_eq!(fixed["contents"][0]["text"], "fixed\n");
    assert_eq!(reads.load(Ordering::SeqCst), 0);

    // The others are produced at each read.
    for n in 1..=2 {
        let read = result(
            &srv,
            "resources/read",
            json!({"uri": "skill://on-call/roster/today.md"}),
        );
        let c = &read["contents"][0];
        assert_eq!(c["text"], format!("read {n}: Alice"));
        assert_eq!(c["mimeType"], "text/markdown");
        assert_eq!(c["uri"], "skill://on-call/roster/today.md");
    }
    let bin = result(
        &srv,
        "resources/read",
        json!({"uri": "skill://on-call/badge.bin"}),
    );
    assert_eq!(bin["contents"][0]["blob"], "/wD+");
    assert_eq!(bin["contents"][0]["mimeType"], "application/octet-stream");

    // No such file: -32602; the producer's error reaches the client.
    assert_eq!(
        error_code(
            &srv,
            "resources/read",
            json!({"uri": "skill://on-call/nope.md"})
        ),
        -32602
    );
    let broken = call(
        srv.addr,
        json!(1),
        "resources/read",
        json!({"uri": "skill://on-call/broken.md"}),
    )
    .json();
    assert_eq!(broken["error"]["code"], -32603, "{broken}");

    // Traversal never reaches the producer.
    for uri in [
        "skill://on-call/../pdf-processing/SKILL.md",
        "skill://on-call/%2e%2e/x",
        "skill://on-call/a%2Fb",
        "skill://on-call//x",
    ] {
        assert_eq!(
            error_code(&srv, "resources/read", json!({"uri": uri})),
            -32602,
            "{uri}"
        );
    }
    assert_eq!(
        *asked.lock().unwrap(),
        [
            "roster/today.md",
            "roster/today.md",
            "badge.bin",
            "nope.md",
            "broken.md"
        ]
    );
}

#[test]
fn skills_added_at_once_from_many_threads_are_all_served() {
    let root = skills_dir("concurrent");
    // Rounds, so that an interleaving that loses a skill shows up.
    for round in 0..20 {
        let skills = Skills::from_dir(&root).unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let skills = skills.clone();
                std::thread::spawn(move || {
                    for i in 0..25 {
                        let name = format!("s-{t}-{i}");
                        let md = format!("---\nname: {name}\ndescription: d\n---\n");
                        skills
                            .add(Skill::new(name.as_str()).file("SKILL.md", md))
                            .unwrap();
                        // Once add returned, the skill is served, and stays.
                        let uris = skills.uris();
                        for j in 0..=i {
                            let uri = format!("skill://s-{t}-{j}/SKILL.md");
                            if !uris.contains(&uri) {
                                return Err(format!("{uri} lost after adding s-{t}-{i}"));
                            }
                        }
                        if i % 5 == 0 {
                            // The watcher's reload, meanwhile.
                            skills.reload().unwrap();
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let lost: Vec<String> = threads
            .into_iter()
            .filter_map(|t| t.join().unwrap().err())
            .collect();
        assert!(lost.is_empty(), "round {round}: {lost:?}");
        // The directory's two skills and every one added.
        assert_eq!(skills.len(), 2 + 8 * 25, "round {round}");
    }
}
