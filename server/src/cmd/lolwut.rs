//! LOLWUT [VERSION v] [...]: Redis's version art, as Redis 7.0's lolwut.c,
//! lolwut5.c and lolwut6.c draw it. The version reported picks the piece
//! (7.0 has none of its own: it answers `Redis ver. 7.0.15`); VERSION 5
//! draws Georg Nees's Schotter in Braille characters, VERSION 6 a city
//! skyline in terminal colours. Both use a random source, as Redis's do,
//! so only their shape and the parts drawn without it are Redis's to the
//! byte; the float arithmetic follows C's (single precision where Redis
//! declares `float`) so that those parts are.

use super::error;
use super::Ctx;
use crate::resp::Reply;

/// The most pixels a canvas may have. Redis's own limits (1,000 columns,
/// 1 to 200 squares) allow a Schotter of 800 million pixels, a reply of
/// some 300 MB; past this one LOLWUT answers an error instead.
const MAX_PIXELS: i64 = 1 << 24;

/// C's `rand()`: 0 to RAND_MAX (2^31 - 1).
fn rand() -> i32 {
    (crate::util::random_u64() >> 33) as i32
}

const RAND_MAX: f32 = 2_147_483_647.0;

/// A grid of colour indices (lwCanvas).
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, background: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![background; (width.max(0) as usize) * (height.max(0) as usize)],
        }
    }

    fn draw(&mut self, x: i32, y: i32, color: u8) {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return;
        }
        self.pixels[(x + y * self.width) as usize] = color;
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return 0;
        }
        self.pixels[(x + y * self.width) as usize]
    }

    /// Bresenham's line (lwDrawLine).
    fn line(&mut self, (mut x1, mut y1): (i32, i32), (x2, y2): (i32, i32), color: u8) {
        let dx = (x2 - x1).abs();
        let dy = (y2 - y1).abs();
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.draw(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square of side `size` centred at (x, y), turned by `angle`
    /// (lwDrawSquare), with C's mix of float and double.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        use std::f64::consts::PI;
        // The square inscribed in a circle of radius 1 has side sqrt(2):
        // Redis's constant, cut at ten decimals, so that sizes round as
        // they do there.
        #[allow(clippy::approx_constant)]
        let size = (f64::from(size) / 1.4142135623) as f32;
        let size = f64::from(size).round() as f32;
        let mut k = (PI / 4.0 + f64::from(angle)) as f32;
        let mut corners = [(0, 0); 4];
        for corner in &mut corners {
            let k64 = f64::from(k);
            *corner = (
                (k64.sin() * f64::from(size) + f64::from(x)).round() as i32,
                (k64.cos() * f64::from(size) + f64::from(y)).round() as i32,
            );
            k = (k64 + PI / 2.0) as f32;
        }
        for j in 0..4 {
            self.line(corners[j], corners[(j + 1) % 4], color);
        }
    }
}

/// An integer argument, as getLongFromObjectOrReply reads it.
fn long(arg: &[u8]) -> Result<i64, Reply> {
    crate::number::parse_i64(arg).ok_or_else(|| Reply::error(error::NOT_INTEGER))
}

/// LOLWUT [VERSION version] [...]
pub fn lolwut(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let reported = crate::catalog::reported_version();
    let mut version = reported.to_string();
    let mut args = &argv[1..];
    if argv.len() >= 3 && super::args::is(argv[1], "version") {
        match long(argv[2]) {
            // Redis prints it as an unsigned int.
            Ok(v) => version = format!("{}.0.0", v as u32),
            Err(reply) => return reply,
        }
        args = &argv[3..];
    }
    let v = version.as_bytes();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let reply = if (at(0) == b'5' && at(1) == b'.' && at(2) != b'9')
        || (at(0) == b'4' && at(1) == b'.' && at(2) == b'9')
    {
        schotter(args, reported)
    } else if (at(0) == b'6' && at(1) == b'.' && at(2) != b'9')
        || (at(0) == b'5' && at(1) == b'.' && at(2) == b'9')
    {
        skyline(args, reported)
    } else {
        Ok(format!("Redis ver. {reported}\n").into_bytes())
    };
    match reply {
        Ok(text) => Reply::Verbatim(text),
        Err(reply) => reply,
    }
}

/// Redis 5's piece (lwDrawSchotter): `[columns [squares-per-row
/// [squares-per-column]]]`, squares turned and moved more at random the
/// lower their row, drawn in Braille (two by four pixels a character).
fn schotter(args: &[&[u8]], reported: &str) -> Result<Vec<u8>, Reply> {
    let mut cols = 66;
    let mut per_row = 8;
    let mut per_col = 12;
    if let Some(arg) = args.first() {
        cols = long(arg)?;
    }
    if let Some(arg) = args.get(1) {
        per_row = long(arg)?;
    }
    if let Some(arg) = args.get(2) {
        per_col = long(arg)?;
    }
    let cols = cols.clamp(1, 1000) as i32;
    let per_row = per_row.clamp(1, 200) as i32;
    let per_col = per_col.clamp(1, 200) as i32;

    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    too_large(width, height)?;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r = [0.0f32; 3];
                for value in &mut r {
                    *value = rand() as f32 / RAND_MAX / per_col as f32 * y as f32;
                }
                for value in &mut r {
                    if rand() % 2 != 0 {
                        *value = -*value;
                    }
                }
                angle = r[0];
                sx = (sx as f32 + r[1] * side / 3.0) as i32;
                sy = (sy as f32 + r[2] * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    let mut text = Vec::new();
    for y in (0..canvas.height).step_by(4) {
        for x in (0..canvas.width).step_by(2) {
            let bits = [
                (x, y),
                (x, y + 1),
                (x, y + 2),
                (x + 1, y),
                (x + 1, y + 1),
                (x + 1, y + 2),
                (x, y + 3),
                (x + 1, y + 3),
            ];
            let byte = bits
                .iter()
                .enumerate()
                .filter(|(_, (px, py))| canvas.get(*px, *py) != 0)
                .fold(0u32, |byte, (bit, _)| byte | 1 << bit);
            // U+2800 + the dots, in UTF-8.
            let code = 0x2800 + byte;
            text.extend([
                (0xE0 | (code >> 12)) as u8,
                (0x80 | ((code >> 6) & 0x3F)) as u8,
                (0x80 | (code & 0x3F)) as u8,
            ]);
        }
        // As Redis's: a newline after every row of characters but where
        // the last pixel row is exactly the row's first.
        if y != canvas.height - 1 {
            text.push(b'\n');
        }
    }
    text.extend_from_slice(
        format!("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {reported}\n")
            .as_bytes(),
    );
    Ok(text)
}

/// Refuses a canvas past [`MAX_PIXELS`].
fn too_large(width: i32, height: i32) -> Result<(), Reply> {
    if i64::from(width) * i64::from(height) > MAX_PIXELS {
        return Err(Reply::error(
            "ERR LOLWUT canvas too large: ask for fewer columns or squares",
        ));
    }
    Ok(())
}

/// One building of the skyline (struct skyscraper).
struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

fn skyscraper(canvas: &mut Canvas, s: &Skyscraper) {
    let start_y = canvas.height - 1;
    let end_y = start_y - s.height + 1;
    let mut y = start_y;
    while y >= end_y {
        for x in s.xoff..s.xoff + s.width {
            // The roof is four pixels narrower.
            if y == end_y && (x <= s.xoff + 1 || x >= s.xoff + s.width - 2) {
                continue;
            }
            let mut color = s.color;
            // Windows in the inner part, two pixels wide and one tall.
            if s.windows
                && x > s.xoff + 1
                && x < s.xoff + s.width - 2
                && y > end_y + 1
                && y < start_y - 1
            {
                let rel_x = x - (s.xoff + 1);
                let rel_y = y - (end_y + 1);
                if (rel_x / 2) % 2 != 0 && rel_y % 2 != 0 {
                    loop {
                        color = (1 + rand() % 2) as u8;
                        if color != s.color {
                            break;
                        }
                    }
                    // A window's two pixels share their colour.
                    if rel_x % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.draw(x, y, color);
        }
        y -= 1;
    }
}

/// Redis 6's piece (generateSkyline): `[columns [rows]]`, two rows of grey
/// buildings behind a row of black ones with lit windows.
fn skyline(args: &[&[u8]], reported: &str) -> Result<Vec<u8>, Reply> {
    let mut cols = 80;
    let mut rows = 20;
    if let Some(arg) = args.first() {
        cols = long(arg)?;
    }
    if let Some(arg) = args.get(1) {
        rows = long(arg)?;
    }
    let cols = cols.clamp(1, 1000) as i32;
    let rows = rows.clamp(1, 1000) as i32;
    too_large(cols, rows)?;
    let mut canvas = Canvas::new(cols, rows, 3);
    let h = canvas.height;
    // The lighter ones first, so they stay behind.
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += rand() % 8;
            let width = 10 + rand() % 9;
            let height = if color == 2 {
                h / 2 + (rand() % h) / 2
            } else {
                h / 2 + (rand() % h) / 3
            };
            let building = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            skyscraper(&mut canvas, &building);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < canvas.width {
        offset += rand() % 8;
        let mut width = 5 + rand() % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let building = Skyscraper {
            xoff: offset,
            width,
            height: h / 3 + (rand() % h) / 2,
            windows: true,
            color: 0,
        };
        skyscraper(&mut canvas, &building);
        offset += width + 5;
    }
    let mut text = Vec::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            // Foreground and background both, for the same look in every
            // terminal.
            let escape: &[u8] = match canvas.get(x, y) {
                1 => b"0;90;100m",
                2 => b"0;37;47m",
                3 => b"0;97;107m",
                _ => b"0;30;40m",
            };
            text.extend_from_slice(b"\x1b[");
            text.extend_from_slice(escape);
            text.extend_from_slice(b" \x1b[0m");
        }
        if y != canvas.height - 1 {
            text.push(b'\n');
        }
    }
    text.extend_from_slice(
        format!(
            "\nDedicated to the 8 bit game developers of past and present.\n\
             Original 8 bit image from Plaguemon by hikikomori. Redis ver. {reported}\n"
        )
        .as_bytes(),
    );
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_square_is_drawn_where_redis_draws_it() {
        // lwDrawSquare(canvas, 10, 10, 8, 0, 1) on a 20x20 canvas: size
        // 8/sqrt(2) rounds to 6, corners at 45, 135, 225, 315 degrees.
        let mut canvas = Canvas::new(20, 20, 0);
        canvas.square(10, 10, 8.0, 0.0, 1);
        for (x, y) in [(14, 14), (14, 6), (6, 6), (6, 14)] {
            assert_eq!(canvas.get(x, y), 1, "corner ({x}, {y})");
        }
        assert_eq!(canvas.get(10, 10), 0, "hollow");
        assert_eq!(canvas.pixels.iter().filter(|&&p| p == 1).count(), 32);
    }

    #[test]
    fn the_skyline_fills_its_canvas() {
        let text = skyline(&[b"7", b"3"], "7.0.15").unwrap_or_default();
        let art = String::from_utf8(text).unwrap_or_default();
        let (pixels, trailer) = art.split_at(art.find("\nDedicated").unwrap_or(0));
        assert_eq!(pixels.lines().count(), 3);
        assert!(pixels.lines().all(|l| l.matches("\x1b[0m").count() == 7));
        assert!(trailer.ends_with("by hikikomori. Redis ver. 7.0.15\n"));
    }
}
