//! Placeholder until the protocol models land.
#[cfg(loom)]
#[test]
fn loom_runs() {
    loom::model(|| {
        let a = std::sync::Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let b = a.clone();
        let t = loom::thread::spawn(move || b.fetch_add(1, loom::sync::atomic::Ordering::SeqCst));
        a.fetch_add(1, loom::sync::atomic::Ordering::SeqCst);
        t.join().unwrap();
        assert_eq!(a.load(loom::sync::atomic::Ordering::SeqCst), 2);
    });
}
