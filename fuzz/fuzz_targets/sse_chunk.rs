//! The SSE decoder fed in pieces split where the input says, every event
//! interpreted as a chunk: nothing panics, memory stays within the line
//! limit, and the split points never change the events.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmprobe::stream::chunk;
use llmprobe::stream::sse::SseDecoder;

/// Small enough that the limit is hit often.
const LIMIT: usize = 4096;

fn decode(pieces: &[&[u8]]) -> (Vec<(Option<Vec<u8>>, Vec<u8>)>, bool) {
    let mut dec = SseDecoder::new(LIMIT);
    let mut events = Vec::new();
    let mut failed = false;
    let mut on_event = |e: llmprobe::stream::sse::SseEvent<'_>| {
        assert!(e.data.len() <= LIMIT);
        let _ = chunk::interpret(e.data);
        events.push((e.event.map(<[u8]>::to_vec), e.data.to_vec()));
    };
    for p in pieces {
        if dec.feed(p, &mut on_event).is_err() {
            failed = true;
            break;
        }
    }
    if !failed && dec.finish(&mut on_event).is_err() {
        failed = true;
    }
    (events, failed)
}

fuzz_target!(|input: &[u8]| {
    // The first byte chooses the split points: a new piece every `step` bytes.
    let Some((&step, body)) = input.split_first() else {
        return;
    };
    let step = usize::from(step % 16) + 1;
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    let (split, split_failed) = decode(&pieces);
    let (whole, whole_failed) = decode(&[body]);
    assert_eq!(split_failed, whole_failed);
    if !whole_failed {
        assert_eq!(split, whole, "split points changed the events");
    }
    // Also as the data of one event, whatever the framing made of it.
    let _ = chunk::interpret(body);
});
