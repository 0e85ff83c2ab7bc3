//! SCRIPT and EVAL as the cache sees them. Every expected reply is the one
//! Redis 7.0.15 gave for the same commands.

use crate::cmd::harness::Harness;

#[test]
fn a_script_that_does_not_compile_is_not_cached() {
    Harness::new().check(&[
        (
            &["EVAL", "return 1 +", "0"],
            "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'\r\n",
        ),
        (&["SCRIPT", "EXISTS", "2b1542794fdd1688e17864bfe9b6bd02547420a8"], "*1\r\n:0\r\n"),
        (&["EVAL", "return 1", "0"], ":1\r\n"),
        (&["SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"], "*1\r\n:1\r\n"),
    ]);
}
