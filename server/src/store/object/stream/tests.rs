use super::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

fn add(stream: &mut Stream, at: StreamId, pairs: &[&str], limits: NodeLimits) {
    let pairs: Vec<&[u8]> = pairs.iter().map(|p| p.as_bytes()).collect();
    assert_eq!(stream.append(at, &pairs, limits), Ok(at));
}

fn ids(entries: &[StreamEntry]) -> Vec<StreamId> {
    entries.iter().map(|e| e.id).collect()
}

/// A stream of `n` entries 1-0, 2-0, ... with the same two fields.
fn counted(n: u64, limits: NodeLimits) -> Stream {
    let mut stream = Stream::default();
    for i in 1..=n {
        let value = i.to_string();
        add(&mut stream, id(i, 0), &["f", &value, "g", "x"], limits);
    }
    stream
}

#[test]
fn a_node_holds_the_bytes_redis_holds() {
    // redis-server 7.0.15: XADD s 1-1 a 1 b 2; XADD s 1-2 a 3 b 4;
    // XADD s 2-0 c hello; XADD s 2-5 a -700 b 100000; XDEL s 1-2; then
    // the listpack of the one node in DUMP s (rdbcompression no).
    let redis = "520000001f00030101010201816102816202000102010001000101010201050103010001\
                 010103010401050100010101dfff0201018163028568656c6c6f060601020101010401dd44\
                 02f2a08601040501ff";
    let mut stream = Stream::default();
    let limits = NodeLimits::default();
    add(&mut stream, id(1, 1), &["a", "1", "b", "2"], limits);
    add(&mut stream, id(1, 2), &["a", "3", "b", "4"], limits);
    add(&mut stream, id(2, 0), &["c", "hello"], limits);
    add(&mut stream, id(2, 5), &["a", "-700", "b", "100000"], limits);
    assert!(stream.delete(id(1, 2)));
    stream.note_deleted(&[id(1, 2)]);
    let nodes: Vec<_> = stream.nodes().collect();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].0, id(1, 1));
    let hex: String = nodes[0]
        .1
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(hex, redis);
    assert_eq!(stream.len(), 3);
    assert_eq!(stream.first_id(), id(1, 1));
    assert_eq!(stream.last_id(), id(2, 5));
    assert_eq!(stream.max_deleted_entry_id(), id(1, 2));
    assert_eq!(stream.entries_added(), 4);
    assert!(Stream::node_is_sound(id(1, 1), nodes[0].1, id(2, 5)));
}

#[test]
fn ranges_read_fields_in_either_direction_and_skip_deleted_entries() {
    let mut stream = Stream::default();
    let limits = NodeLimits::default();
    add(&mut stream, id(5, 0), &["a", "1"], limits);
    add(&mut stream, id(5, 1), &["b", "2", "c", "3"], limits);
    add(&mut stream, id(7, 0), &["a", "4"], limits);
    let all = stream.range(StreamId::MIN, StreamId::MAX, false, 0);
    assert_eq!(ids(&all), vec![id(5, 0), id(5, 1), id(7, 0)]);
    assert_eq!(
        all[1].fields,
        vec![
            (b"b".to_vec(), b"2".to_vec()),
            (b"c".to_vec(), b"3".to_vec())
        ]
    );
    assert_eq!(all[2].fields, vec![(b"a".to_vec(), b"4".to_vec())]);
    let back = stream.range(StreamId::MIN, StreamId::MAX, true, 2);
    assert_eq!(ids(&back), vec![id(7, 0), id(5, 1)]);
    assert_eq!(
        ids(&stream.range(id(5, 1), id(6, 0), false, 0)),
        vec![id(5, 1)]
    );
    assert_eq!(ids(&stream.range(id(6, 0), id(5, 0), false, 0)), vec![]);
    assert!(stream.delete(id(5, 1)));
    assert!(!stream.delete(id(5, 1)), "deleted once");
    assert!(!stream.delete(id(6, 0)), "never there");
    assert_eq!(
        ids(&stream.range(StreamId::MIN, StreamId::MAX, true, 0)),
        vec![id(7, 0), id(5, 0)]
    );
    assert_eq!(stream.edge_id(true, true), id(5, 0));
    assert_eq!(stream.edge_id(false, false), id(7, 0));
}

#[test]
fn nodes_close_at_the_entry_and_byte_limits() {
    let stream = counted(250, NodeLimits::default());
    let masters: Vec<StreamId> = stream.nodes().map(|(m, _)| m).collect();
    assert_eq!(masters, vec![id(1, 0), id(101, 0), id(201, 0)]);
    let small = NodeLimits {
        max_bytes: 60,
        max_entries: 0,
    };
    let stream = counted(10, small);
    assert!(stream.node_count() > 1);
    for (_, lp) in stream.nodes() {
        // A node is closed once it holds 60 bytes or more with the next
        // entry's field bytes counted.
        assert!(lp.size() < 60 + 16, "{}", lp.size());
    }
    assert_eq!(
        ids(&stream.range(StreamId::MIN, StreamId::MAX, false, 0)).len(),
        10
    );
}

#[test]
fn deleting_a_nodes_last_live_entry_drops_the_node() {
    let mut stream = counted(150, NodeLimits::default());
    for i in 1..=100 {
        assert!(stream.delete(id(i, 0)));
    }
    assert_eq!(stream.node_count(), 1);
    assert_eq!(stream.len(), 50);
    stream.note_deleted(&[id(1, 0)]);
    assert_eq!(stream.first_id(), id(101, 0));
}

#[test]
fn an_exact_trim_marks_entries_and_an_approximate_one_removes_whole_nodes() {
    let limits = NodeLimits::default();
    let exact = |to| Trim {
        to,
        approx: false,
        limit: 0,
    };
    let approx = |to| Trim {
        to,
        approx: true,
        limit: 10_000,
    };

    let mut stream = counted(250, limits);
    assert_eq!(stream.trim(approx(TrimTo::MaxLen(120))), 100);
    assert_eq!(stream.len(), 150);
    assert_eq!(
        stream.trim(approx(TrimTo::MaxLen(120))),
        0,
        "no whole node to drop"
    );
    assert_eq!(stream.trim(exact(TrimTo::MaxLen(120))), 30);
    assert_eq!(stream.len(), 120);
    assert_eq!(stream.first_id(), id(131, 0));
    assert_eq!(stream.node_count(), 2);

    let mut stream = counted(250, limits);
    assert_eq!(stream.trim(exact(TrimTo::MinId(id(205, 0)))), 204);
    assert_eq!(stream.first_id(), id(205, 0));
    let mut stream = counted(250, limits);
    assert_eq!(stream.trim(approx(TrimTo::MinId(id(205, 0)))), 200);

    // LIMIT: no node goes that would take the count past it.
    let mut stream = counted(250, limits);
    let limited = Trim {
        to: TrimTo::MaxLen(0),
        approx: true,
        limit: 150,
    };
    assert_eq!(stream.trim(limited), 100);

    let mut stream = counted(3, limits);
    assert_eq!(stream.trim(exact(TrimTo::MaxLen(0))), 3);
    assert_eq!(stream.len(), 0);
    assert_eq!(stream.first_id(), StreamId::MIN);
    assert_eq!(stream.last_id(), id(3, 0));
}

#[test]
fn ids_are_chosen_as_xadd_chooses_them() {
    let mut stream = Stream::default();
    assert_eq!(stream.next_id(None, false, 1000), Ok(id(1000, 0)));
    add(&mut stream, id(1000, 0), &["a", "1"], NodeLimits::default());
    // The clock went back: the last ID's next sequence.
    assert_eq!(stream.next_id(None, false, 900), Ok(id(1000, 1)));
    assert_eq!(stream.next_id(Some(id(1000, 0)), false, 0), Ok(id(1000, 1)));
    assert_eq!(stream.next_id(Some(id(2000, 0)), false, 0), Ok(id(2000, 0)));
    assert_eq!(
        stream.next_id(Some(id(1000, 0)), true, 0),
        Err(AppendError::NotGreater)
    );
    assert_eq!(
        stream.next_id(Some(id(999, 5)), false, 0),
        Err(AppendError::NotGreater)
    );
    let pairs: [&[u8]; 2] = [b"a", b"1"];
    assert_eq!(
        stream.append(id(1000, 0), &pairs, NodeLimits::default()),
        Err(AppendError::NotGreater)
    );
    stream.set_id(StreamId::MAX, None, None);
    assert_eq!(
        stream.next_id(None, false, 5000),
        Err(AppendError::NotGreater)
    );
    // `<ms>-*` at the last sequence of its millisecond does not roll over.
    let mut full = Stream::default();
    full.set_id(id(1, u64::MAX), None, None);
    assert_eq!(
        full.next_id(Some(id(1, 0)), false, 0),
        Err(AppendError::TooLarge)
    );
    assert_eq!(id(1, u64::MAX).next(), Some(id(2, 0)));
    assert_eq!(id(2, 0).prev(), Some(id(1, u64::MAX)));
    assert_eq!(StreamId::MIN.prev(), None);
    assert_eq!(StreamId::decode(&id(7, 9).encode()), id(7, 9));
}

#[test]
fn a_node_that_lies_about_its_entries_is_not_sound() {
    let stream = counted(3, NodeLimits::default());
    let empty = Listpack::new();
    let (master, lp) = stream.nodes().next().unwrap_or((StreamId::MIN, &empty));
    assert!(Stream::node_is_sound(master, lp, id(3, 0)));
    assert!(
        !Stream::node_is_sound(master, lp, id(2, 0)),
        "entries past the last ID"
    );
    let mut lying = lp.clone();
    let first = lying.first().unwrap_or(0);
    lying.replace_int(first, 5);
    assert!(
        !Stream::node_is_sound(master, &lying, id(3, 0)),
        "a count off"
    );
}

#[test]
fn a_node_walked_backwards_meets_the_entries_walked_forwards() {
    let mut stream = Stream::default();
    let limits = NodeLimits::default();
    add(&mut stream, id(1, 0), &["a", "1", "b", "2"], limits);
    add(&mut stream, id(1, 5), &["other", "x"], limits);
    add(&mut stream, id(2, 0), &["a", "-9000", "b", "hello"], limits);
    add(
        &mut stream,
        id(3, 1),
        &["a", "1", "b", "2", "c", "3"],
        limits,
    );
    assert!(stream.delete(id(2, 0)));
    let empty = Listpack::new();
    let (master, lp) = stream.nodes().next().unwrap_or((StreamId::MIN, &empty));
    let node = node::Node::open(master, lp);
    let forward: Vec<StreamId> = node.forward().map(|s| s.id).collect();
    let mut backward: Vec<StreamId> = node.backward().map(|s| s.id).collect();
    backward.reverse();
    assert_eq!(forward, vec![id(1, 0), id(1, 5), id(2, 0), id(3, 1)]);
    assert_eq!(backward, forward);
    let checked: Vec<StreamId> = node::checked_slots(master, lp)
        .unwrap_or_default()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(checked, forward);
    assert_eq!(
        ids(&stream.range(StreamId::MIN, StreamId::MAX, true, 0)),
        vec![id(3, 1), id(1, 5), id(1, 0)]
    );
    assert_eq!(stream.edge_id(false, true), id(3, 1));
}

#[test]
fn entries_at_finds_each_id_as_a_lookup_of_it_does() {
    // Nodes of three entries; some IDs deleted, some never there, some
    // before the first node and past the last, several in one node.
    let limits = NodeLimits {
        max_bytes: 0,
        max_entries: 3,
    };
    let mut stream = counted(20, limits);
    for gone in [2, 7, 8, 9] {
        assert!(stream.delete(id(gone, 0)));
    }
    let wanted = [
        id(0, 5),
        id(1, 0),
        id(2, 0),
        id(3, 0),
        id(3, 0),
        id(5, 1),
        id(8, 0),
        id(10, 0),
        id(12, 0),
        id(20, 0),
        id(21, 0),
    ];
    let expected: Vec<Option<StreamEntry>> = wanted
        .iter()
        .map(|w| stream.range(*w, *w, false, 1).pop())
        .collect();
    assert_eq!(stream.entries_at(&wanted), expected);
    let found: Vec<bool> = wanted.iter().map(|w| stream.contains(*w)).collect();
    assert_eq!(
        found,
        expected.iter().map(Option::is_some).collect::<Vec<_>>()
    );
    assert_eq!(
        expected.iter().filter(|e| e.is_some()).count(),
        6,
        "1-0, 3-0 twice, 10-0, 12-0 and 20-0 are there"
    );
}
