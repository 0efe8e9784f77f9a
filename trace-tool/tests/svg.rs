//! The SVG timeline of a trace the runtime records: well-formed XML (read
//! back by a small checker of tags and attributes), one lane per worker in
//! topology order, as many poll rectangles as the trace has polls, a lane
//! per `block_on` thread that holds its local tasks' polls; and the
//! summary's figures.

use hwsched::{Runtime, TopologySource};

/// A well-formedness check of the SVG this tool writes: every tag closes in
/// order, attributes are quoted, text holds no bare `<` or `&`. Returns
/// the elements as (name, attributes) in document order.
fn elements(xml: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find('<') {
        let text = &rest[..i];
        assert!(!text.contains('>'), "a bare '>' in text: {text:?}");
        for (k, _) in text.match_indices('&') {
            let ent = &text[k..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;"]
                    .iter()
                    .any(|e| ent.starts_with(e)),
                "a bare '&' in text: {text:?}"
            );
        }
        let end = rest[i..].find('>').expect("a tag closes") + i;
        let tag = &rest[i + 1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name),
                "closing tag out of order"
            );
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let (name, mut attrs_src) = tag.split_once(' ').unwrap_or((tag, ""));
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
            "tag {name:?}"
        );
        let mut attrs = Vec::new();
        loop {
            attrs_src = attrs_src.trim_start();
            if attrs_src.is_empty() {
                break;
            }
            let (k, v) = attrs_src
                .split_once("=\"")
                .expect("an attribute is key=\"value\"");
            let close = v.find('"').expect("a quoted value closes");
            assert!(!v[..close].contains('<'), "'<' in an attribute");
            attrs.push((k.to_owned(), v[..close].to_owned()));
            attrs_src = &v[close + 1..];
        }
        out.push((name.to_owned(), attrs.clone()));
        if !self_closing {
            stack.push(name.to_owned());
        }
    }
    assert!(rest.trim().is_empty(), "text after the root");
    assert!(stack.is_empty(), "unclosed tags: {stack:?}");
    assert_eq!(
        out.first().map(|e| e.0.as_str()),
        Some("svg"),
        "the root is svg"
    );
    out
}

fn class_count(els: &[(String, Vec<(String, String)>)], class: &str) -> usize {
    els.iter()
        .filter(|(_, a)| a.iter().any(|(k, v)| k == "class" && v == class))
        .count()
}

fn recorded_trace() -> (hwsched::trace::Trace, String) {
    let rt = Runtime::builder()
        .topology(TopologySource::Synthetic("pack:2 l3:2 core:2 pu:1".into()))
        .pin_workers(false)
        .build()
        .unwrap();
    let tracer = rt.tracer();
    tracer.start();
    rt.block_on(async {
        let (tx, rx) = async_channel::bounded::<u32>(4);
        let rx2 = rx.clone();
        let a = hwsched::spawn(async move { while rx.recv().await.is_ok() {} });
        let b = hwsched::spawn(async move { while rx2.recv().await.is_ok() {} });
        let hs: Vec<_> = (0..40)
            .map(|i| {
                let tx = tx.clone();
                hwsched::spawn(async move {
                    for j in 0..10 {
                        tx.send(i * j).await.unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        for h in hs {
            h.await.unwrap();
        }
        a.await.unwrap();
        b.await.unwrap();
    });
    drop(rt);
    let t = tracer.stop();
    let mut json = Vec::new();
    t.write_chrome_json(&mut json).unwrap();
    (t, String::from_utf8(json).unwrap())
}

#[test]
fn svg_is_well_formed_with_a_lane_per_worker_and_a_rect_per_poll() {
    let (t, json) = recorded_trace();
    let parsed = hwsched_trace::parse(&json).unwrap();
    assert_eq!(
        parsed.polls.len(),
        t.polls().count(),
        "the tool reads every poll"
    );
    assert!(parsed.polls.len() >= 42, "every task polled at least once");
    let svg = hwsched_trace::svg(&parsed);
    let els = elements(&svg);
    assert_eq!(
        class_count(&els, "lane"),
        t.workers().len(),
        "one lane per worker"
    );
    assert_eq!(
        class_count(&els, "poll"),
        t.polls().count(),
        "one rect per poll"
    );
    // The lanes in topology order: worker indices ascending, which the
    // runtime numbers along the topology.
    let lanes: Vec<usize> = els
        .iter()
        .filter(|(_, a)| a.iter().any(|(k, v)| k == "class" && v == "lane"))
        .map(|(_, a)| {
            let w = a
                .iter()
                .find(|(k, _)| k == "data-worker")
                .expect("a lane names its worker");
            w.1.parse().expect("a worker index")
        })
        .collect();
    assert_eq!(lanes, (0..t.workers().len()).collect::<Vec<_>>());
    let llcs: Vec<u64> = parsed.workers.iter().map(|w| w.llc).collect();
    assert!(
        llcs.windows(2).all(|w| w[0] <= w[1]),
        "grouped by LLC: {llcs:?}"
    );
}

#[test]
fn summary_counts_what_the_trace_holds() {
    let (t, json) = recorded_trace();
    let parsed = hwsched_trace::parse(&json).unwrap();
    let s = hwsched_trace::summary(&parsed);
    assert!(s.contains(&format!("{} polls", t.polls().count())), "{s}");
    let wakes = t
        .events()
        .iter()
        .filter(|e| matches!(e.kind, hwsched::trace::EventKind::Wake { .. }))
        .count() as u64;
    assert_eq!(
        parsed.wakes.values().sum::<u64>(),
        wakes,
        "every wake counted by decision"
    );
    for w in 0..t.workers().len() {
        let busy: f64 = parsed
            .polls
            .iter()
            .filter(|p| p.lane == hwsched_trace::Lane::Worker(w))
            .map(|p| p.dur_us)
            .sum();
        let span = parsed.span_us.1 - parsed.span_us.0;
        assert!(
            busy <= span * 1.0001,
            "worker {w} busier than the trace is long"
        );
    }
    assert!(
        s.contains("run-queue delay")
            && s.contains("longest polls")
            && s.contains("steals per level")
    );
}

#[test]
fn svg_of_a_hand_written_trace() {
    let json = r#"{"traceEvents":[
      {"name":"thread_name","ph":"M","pid":2,"tid":2,"ts":0,"args":{"name":"worker 1","worker":1,"core":1,"llc":1,"numa":0,"package":0}},
      {"name":"thread_name","ph":"M","pid":1,"tid":1,"ts":0,"args":{"name":"worker 0","worker":0,"core":0,"llc":0,"numa":0,"package":0}},
      {"name":"alpha:1","ph":"X","pid":1,"tid":1,"ts":1.0,"dur":2.0,"args":{"task":1,"at":"alpha:1","queued_ns":500}},
      {"name":"beta<&>:2","ph":"X","pid":2,"tid":2,"ts":2.0,"dur":1.0,"args":{"task":2,"at":"beta<&>:2","queued_ns":1500}},
      {"name":"park","ph":"i","s":"t","pid":1,"tid":1,"ts":3.5,"args":{"why":"idle"}},
      {"name":"unpark","ph":"i","s":"t","pid":1,"tid":1,"ts":5.0,"args":{}},
      {"name":"steal","ph":"i","s":"t","pid":2,"tid":2,"ts":4.0,"args":{"victim":0,"moved":3,"level":"NUMA"}},
      {"name":"wake","ph":"i","s":"t","pid":1,"tid":1,"ts":1.5,"args":{"task":2,"to":1,"decision":"idle core"}}
    ]}"#;
    let t = hwsched_trace::parse(json).unwrap();
    assert_eq!(
        t.workers.iter().map(|w| w.index).collect::<Vec<_>>(),
        [0, 1]
    );
    let els = elements(&hwsched_trace::svg(&t));
    assert_eq!(class_count(&els, "lane"), 2);
    assert_eq!(class_count(&els, "poll"), 2);
    assert_eq!(class_count(&els, "park"), 1);
    assert_eq!(class_count(&els, "steal"), 1);
    let s = hwsched_trace::summary(&t);
    assert!(
        s.contains("NUMA            1 steals,        3 tasks moved"),
        "{s}"
    );
    assert!(s.contains("idle core"), "{s}");
    assert!(s.contains("max 1.5 us"), "{s}");
}

#[test]
fn block_on_threads_have_lanes_holding_their_local_tasks_polls() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .pin_workers(false)
        .build()
        .unwrap();
    let tracer = rt.tracer();
    tracer.start();
    let sum = rt.block_on(async {
        let hs: Vec<_> = (0..8u32)
            .map(|i| {
                hwsched::spawn_local(async move {
                    hwsched::yield_now().await;
                    i
                })
            })
            .collect();
        // A worker's task beside them, in a worker's lane.
        let mut sum = hwsched::spawn(async { 100 }).await.unwrap();
        for h in hs {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(sum, 100 + (0..8).sum::<u32>());
    drop(rt);
    let t = tracer.stop();
    let mut json = Vec::new();
    t.write_chrome_json(&mut json).unwrap();
    let parsed = hwsched_trace::parse(&String::from_utf8(json).unwrap()).unwrap();

    let lanes: Vec<u32> = t.block_on_threads().collect();
    assert_eq!(lanes.len(), 1);
    assert_eq!(parsed.block_on.len(), 1, "the tool reads the block_on lane");
    let lane = hwsched_trace::Lane::BlockOn(parsed.block_on[0].tid);
    let local = |th: hwsched::trace::Thread| th == hwsched::trace::Thread::Outside(lanes[0]);
    let in_trace = t.polls().filter(|p| local(p.thread)).count();
    assert!(in_trace >= 16, "each local task polled at least twice");
    assert_eq!(
        parsed.polls.iter().filter(|p| p.lane == lane).count(),
        in_trace,
        "the lane holds the block_on thread's polls"
    );
    assert_eq!(parsed.polls.len(), t.polls().count(), "and no poll is lost");

    let els = elements(&hwsched_trace::svg(&parsed));
    assert_eq!(class_count(&els, "lane"), 2, "a lane per worker");
    assert_eq!(class_count(&els, "block-on-lane"), 1);
    assert_eq!(class_count(&els, "poll"), t.polls().count());
    let s = hwsched_trace::summary(&parsed);
    assert!(
        s.contains("block_on thread (local tasks)"),
        "the summary lists the block_on lane: {s}"
    );
}
