//! INFO's persistence and replication sections: snapshots, the append-only
//! file, and this node's place in replication (a master's replicas, or a
//! replica's link to its master), field for field in Redis 7.0's order.

use std::sync::atomic::Ordering;

use super::load;
use crate::cmd::Ctx;

pub(super) fn persistence(ctx: &Ctx<'_>) -> Vec<String> {
    let state = &ctx.shared.persistence;
    let changes = crate::persistence::changes_since_last_save(&ctx.shared.stats, state);
    let in_progress = state.bgsave_in_progress.load(Ordering::Relaxed);
    let loading = state.loading.load(Ordering::Relaxed);
    let current_secs = if in_progress {
        (ctx.now_ms.saturating_sub(load(&state.bgsave_started_ms)) / 1000) as i64
    } else {
        -1
    };
    let aof = &ctx.shared.aof;
    let aof_on = ctx.shared.config.read().appendonly;
    let rewriting = aof.rewrite_in_progress.load(Ordering::Relaxed);
    let rewrite_secs = if rewriting {
        (ctx.now_ms.saturating_sub(load(&aof.rewrite_started_ms)) / 1000) as i64
    } else {
        -1
    };
    let mut lines = vec![
        format!("loading:{}", loading as u8),
        "async_loading:0".to_string(),
        format!(
            "current_cow_peak:{}",
            if in_progress {
                state.snapshot_memory.peak()
            } else {
                0
            }
        ),
        format!("current_cow_size:{}", state.snapshot_memory.current()),
        "current_cow_size_age:0".to_string(),
        "current_fork_perc:0.00".to_string(),
        "current_save_keys_processed:0".to_string(),
        "current_save_keys_total:0".to_string(),
        format!("rdb_changes_since_last_save:{changes}"),
        format!("rdb_bgsave_in_progress:{}", in_progress as u8),
        format!("rdb_last_save_time:{}", load(&state.last_save_unix)),
        format!(
            "rdb_last_bgsave_status:{}",
            if state.last_save_failed.load(Ordering::Relaxed) {
                "err"
            } else {
                "ok"
            }
        ),
        format!(
            "rdb_last_bgsave_time_sec:{}",
            state.last_bgsave_secs.load(Ordering::Relaxed)
        ),
        format!("rdb_current_bgsave_time_sec:{current_secs}"),
        format!("rdb_saves:{}", load(&state.saves)),
        format!("rdb_last_cow_size:{}", load(&state.last_cow_size)),
        format!(
            "rdb_last_load_keys_expired:{}",
            load(&state.last_load_expired)
        ),
        format!("rdb_last_load_keys_loaded:{}", load(&state.last_load_keys)),
        format!("aof_enabled:{}", aof_on as u8),
        format!("aof_rewrite_in_progress:{}", rewriting as u8),
        format!(
            "aof_rewrite_scheduled:{}",
            aof.rewrite_scheduled.load(Ordering::Relaxed) as u8
        ),
        format!(
            "aof_last_rewrite_time_sec:{}",
            aof.last_rewrite_secs.load(Ordering::Relaxed)
        ),
        format!("aof_current_rewrite_time_sec:{rewrite_secs}"),
        format!(
            "aof_last_bgrewrite_status:{}",
            if aof.last_rewrite_failed.load(Ordering::Relaxed) {
                "err"
            } else {
                "ok"
            }
        ),
        format!("aof_rewrites:{}", load(&aof.rewrites)),
        format!(
            "aof_rewrites_consecutive_failures:{}",
            load(&aof.consecutive_failures)
        ),
        format!(
            "aof_last_write_status:{}",
            if aof.write_failed.load(Ordering::Relaxed) {
                "err"
            } else {
                "ok"
            }
        ),
        format!("aof_last_cow_size:{}", load(&aof.last_cow_size)),
        "module_fork_in_progress:0".to_string(),
        "module_fork_last_cow_size:0".to_string(),
    ];
    if aof_on {
        let figures = crate::persistence::aof::info(ctx.shared);
        lines.extend([
            format!("aof_current_size:{}", figures.current_size),
            format!("aof_base_size:{}", figures.base_size),
            format!(
                "aof_pending_rewrite:{}",
                aof.rewrite_scheduled.load(Ordering::Relaxed) as u8
            ),
            format!("aof_buffer_length:{}", figures.buffer_length),
            "aof_pending_bio_fsync:0".to_string(),
            "aof_delayed_fsync:0".to_string(),
        ]);
    }
    if loading {
        // Redis's figures, its ETA formula included.
        let total = load(&state.loading_total_bytes);
        let loaded = load(&state.loading_loaded_bytes);
        let started = load(&state.loading_start_unix);
        let elapsed = (ctx.now_ms / 1000).saturating_sub(started);
        let eta = if elapsed == 0 {
            1
        } else {
            elapsed * total.saturating_sub(loaded) / (loaded + 1)
        };
        let perc = if total == 0 {
            0.0
        } else {
            loaded as f64 * 100.0 / total as f64
        };
        lines.extend([
            format!("loading_start_time:{started}"),
            format!("loading_total_bytes:{total}"),
            "loading_rdb_used_mem:0".to_string(),
            format!("loading_loaded_bytes:{loaded}"),
            format!("loading_loaded_perc:{perc:.2}"),
            format!("loading_eta_seconds:{eta}"),
        ]);
    }
    lines
}

pub(super) fn replication(ctx: &Ctx<'_>) -> Vec<String> {
    let replicas = crate::cmd::replication::replica_lines(ctx.shared, ctx.now_ms);
    let feed = ctx.shared.store.feed();
    let backlog = feed.backlog_info();
    let history = feed.history();
    let mut lines = match ctx.shared.master_link.target() {
        Some(target) => replica_lines(ctx, &target, history.offset),
        None => vec!["role:master".to_string()],
    };
    lines.push(format!("connected_slaves:{}", replicas.len()));
    lines.extend(crate::cmd::replication::good_replicas_line(
        ctx.shared, ctx.now_ms,
    ));
    lines.extend(replicas);
    lines.extend([
        format!(
            "master_failover_state:{}",
            ctx.shared.failover.stage().name()
        ),
        format!("master_replid:{}", history.replid),
        format!("master_replid2:{}", history.replid2),
        format!("master_repl_offset:{}", history.offset),
        format!("second_repl_offset:{}", history.second_offset),
        format!("repl_backlog_active:{}", u8::from(backlog.active)),
        format!("repl_backlog_size:{}", backlog.size),
        format!(
            "repl_backlog_first_byte_offset:{}",
            backlog.first_byte_offset
        ),
        format!("repl_backlog_histlen:{}", backlog.histlen),
    ]);
    lines
}

/// INFO replication's lines of a replica, in Redis 7.0's order: the
/// master, the link, the transfer while one runs, how long the link has
/// been down while it is.
fn replica_lines(ctx: &Ctx<'_>, target: &crate::master_link::Target, offset: u64) -> Vec<String> {
    use crate::master_link::LinkState;
    let link = &ctx.shared.master_link;
    let now_secs = ctx.now_ms / 1000;
    let seconds_since = |ms: u64| now_secs.saturating_sub(ms / 1000) as i64;
    let state = link.state();
    let linked = link.applied_offset.load(Ordering::Relaxed) >= 0;
    // Without a link, the offsets are those of the history held.
    let (read, applied) = if linked {
        (
            link.read_offset.load(Ordering::Relaxed),
            link.applied_offset.load(Ordering::Relaxed),
        )
    } else {
        (offset as i64, offset as i64)
    };
    let mut lines = vec![
        "role:slave".to_string(),
        format!("master_host:{}", target.host),
        format!("master_port:{}", target.port),
        format!(
            "master_link_status:{}",
            if state == LinkState::Connected {
                "up"
            } else {
                "down"
            }
        ),
        format!(
            "master_last_io_seconds_ago:{}",
            if linked {
                seconds_since(link.last_io_ms.load(Ordering::Relaxed))
            } else {
                -1
            }
        ),
        format!(
            "master_sync_in_progress:{}",
            u8::from(state == LinkState::Sync)
        ),
        format!("slave_read_repl_offset:{read}"),
        format!("slave_repl_offset:{applied}"),
    ];
    if state == LinkState::Sync {
        let total = link.sync_total_bytes.load(Ordering::Relaxed);
        let read = link.sync_read_bytes.load(Ordering::Relaxed) as i64;
        let perc = if total > 0 {
            read as f64 / total as f64 * 100.0
        } else {
            0.0
        };
        lines.extend([
            format!("master_sync_total_bytes:{total}"),
            format!("master_sync_read_bytes:{read}"),
            format!("master_sync_left_bytes:{}", total - read),
            format!("master_sync_perc:{perc:.2}"),
            format!(
                "master_sync_last_io_seconds_ago:{}",
                seconds_since(link.last_io_ms.load(Ordering::Relaxed))
            ),
        ]);
    }
    if state != LinkState::Connected {
        let down_since = link.down_since_ms.load(Ordering::Relaxed);
        lines.push(format!(
            "master_link_down_since_seconds:{}",
            if down_since == 0 {
                -1
            } else {
                seconds_since(down_since)
            }
        ));
    }
    let config = ctx.shared.config.read();
    lines.extend([
        format!("slave_priority:{}", config.replica_priority),
        format!("slave_read_only:{}", u8::from(config.replica_read_only)),
        format!("replica_announced:{}", u8::from(config.replica_announced)),
    ]);
    lines
}
