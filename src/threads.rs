//! Work spread over a few plain threads, each taking the next item as it finishes one. Plain
//! threads rather than rayon's pool: the items block (ptxas and cuobjdump subprocesses, device
//! launches), and a rayon worker waiting on its own parallel work would meanwhile steal a
//! whole other item.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// `f` over `items` on `jobs` threads (at least one, at most one per item); results in the
/// order of `items`.
pub fn map_on_threads<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    done.lock().expect("no panics while holding the lock")[i] = Some(r);
                }
            });
        }
    });
    done.into_inner()
        .expect("no panics while holding the lock")
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}

/// [`map_on_threads`] for fallible work: after the first error no thread starts another item;
/// the error of the earliest failing item is returned.
pub fn try_on_threads<T: Sync, E: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> Result<(), E> + Sync,
) -> Result<(), E> {
    let stop = AtomicBool::new(false);
    map_on_threads(items, jobs, |item| {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let r = f(item);
        if r.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        r
    })
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_order_of_the_items_whatever_the_threads() {
        let items: Vec<u64> = (0..100).collect();
        for jobs in [1, 3, 16, 500] {
            let out = map_on_threads(&items, jobs, |&x| {
                std::thread::sleep(std::time::Duration::from_micros((x * 37) % 200));
                x * x
            });
            assert_eq!(out, items.iter().map(|x| x * x).collect::<Vec<_>>());
        }
        assert!(map_on_threads(&[] as &[u8], 4, |&x| x).is_empty());
    }

    #[test]
    fn the_first_error_stops_new_items() {
        let ran = AtomicUsize::new(0);
        let items: Vec<u32> = (0..1000).collect();
        let r = try_on_threads(&items, 1, |&x| {
            ran.fetch_add(1, Ordering::Relaxed);
            if x == 10 { Err(x) } else { Ok(()) }
        });
        assert_eq!(r, Err(10));
        assert_eq!(ran.load(Ordering::Relaxed), 11);
    }
}
