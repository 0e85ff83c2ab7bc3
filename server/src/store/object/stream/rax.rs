//! How many nodes Redis's radix tree (rax.c) would use for a stream's node
//! keys: XINFO STREAM's `radix-tree-nodes`.
//!
//! tally keeps the nodes in a B-tree, so the count is worked out from the
//! keys, as the compressed radix tree rax builds from them: a node where
//! keys part ways (one child per next byte), a compressed node for a run of
//! bytes every key below shares, and a node where each key ends. The root
//! counts even when the tree is empty.

use super::StreamId;

/// The nodes of the radix tree holding `keys` (in order, each once).
pub(super) fn node_count(keys: &[StreamId]) -> usize {
    let encoded: Vec<[u8; 16]> = keys.iter().map(|k| k.encode()).collect();
    if encoded.is_empty() {
        return 1;
    }
    below(&encoded, 0)
}

/// The nodes from the one at `depth` down, for keys (sorted) sharing
/// their first `depth` bytes.
fn below(keys: &[[u8; 16]], depth: usize) -> usize {
    if depth == 16 {
        // The key ends here: a node with no children.
        return 1;
    }
    let first = &keys[0];
    let last = &keys[keys.len() - 1];
    // Sorted: what the first and last share, all share.
    let shared = (depth..16).take_while(|&i| first[i] == last[i]).count();
    if shared > 0 {
        // One compressed node for the shared run, then what follows it.
        return 1 + below(keys, depth + shared);
    }
    // The keys part ways: this node, and one subtree per next byte.
    let mut nodes = 1;
    let mut start = 0;
    while start < keys.len() {
        let byte = keys[start][depth];
        let end = start
            + keys[start..]
                .iter()
                .take_while(|k| k[depth] == byte)
                .count();
        nodes += below(&keys[start..end], depth + 1);
        start = end;
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_rax_s_compression() {
        assert_eq!(node_count(&[]), 1, "an empty tree is its root");
        // One key: the root compresses all 16 bytes, then the key's end.
        assert_eq!(node_count(&[StreamId::new(1, 0)]), 2);
        // Two keys differing in the last byte: the shared 15 bytes, the
        // node where they part, their two ends.
        assert_eq!(node_count(&[StreamId::new(1, 0), StreamId::new(1, 1)]), 4);
        // Differing in byte 7 (ms) and then sharing 8 bytes of sequence:
        // shared run, parting node, and under each a run and an end.
        assert_eq!(node_count(&[StreamId::new(1, 0), StreamId::new(2, 0)]), 6);
    }
}
