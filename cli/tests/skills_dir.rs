//! `genmcp serve --skills DIR`: the demo serves the directory's skills, and a
//! change on disk is picked up by the watcher (`--skills-poll`) and told to a
//! listen stream as a resource list change.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::{call, listen};
use serde_json::json;

#[test]
fn a_served_directory_is_watched_and_its_changes_are_told() {
    let root = std::env::temp_dir().join(format!("genmcp-skills-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("git-workflow")).unwrap();
    std::fs::write(
        root.join("git-workflow/SKILL.md"),
        "---\nname: git-workflow\ndescription: Our Git conventions\n---\n# Git\n",
    )
    .unwrap();
    let (mut child, addr) = common::serve_child::spawn_serve(
        &[
            "--port",
            "0",
            "--skills",
            root.to_str().unwrap(),
            "--skills-poll",
            "1",
        ],
        &[],
    );
    let list = call(addr, json!(1), "skills/list", json!({})).json();
    assert_eq!(
        list["result"]["skills"][0]["uri"], "skill://git-workflow/SKILL.md",
        "{list}"
    );
    let discover = call(addr, json!(2), "server/discover", json!({})).json();
    assert_eq!(
        discover["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true})
    );

    let mut stream = listen(addr, json!("sk"), json!({"resourcesListChanged": true}));
    stream.set_timeout(Duration::from_secs(10));
    let ack = stream.next_message().unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    std::fs::write(root.join("git-workflow/branches.md"), "Branch from main.\n").unwrap();
    let n = stream
        .next_message()
        .expect("a change within the poll period");
    assert_eq!(n["method"], "notifications/resources/list_changed");
    let get = call(
        addr,
        json!(3),
        "skills/get",
        json!({"uri": "skill://git-workflow/SKILL.md"}),
    )
    .json();
    let uris: Vec<&str> = get["result"]["skill"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(
        uris,
        [
            "skill://git-workflow/SKILL.md",
            "skill://git-workflow/branches.md"
        ]
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&root);
}
