//! The lane colours shared by the SVG pictures and the terminal viewer, so a lane looks the
//! same everywhere: 32 hues around the wheel, even lanes light and odd lanes darker, so lanes
//! next to each other (which sit side by side in every fragment) differ in both.

/// RGB of a lane's colour.
pub fn lane_rgb(lane: u32) -> (u8, u8, u8) {
    let h = f64::from(lane % 32) * 360.0 / 32.0;
    let (s, l) = if lane.is_multiple_of(2) {
        (0.80, 0.83)
    } else {
        (0.70, 0.67)
    };
    hsl_rgb(h, s, l)
}

fn hsl_rgb(h: f64, s: f64, l: f64) -> (u8, u8, u8) {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = h / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let to = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (to(r), to(g), to(b))
}

/// RGB of a warp's colour (warp 0..3 of a warpgroup): four strong hues apart from the lane
/// palette's pastels, for the bands that tell a warpgroup's warps apart.
pub fn warp_rgb(warp: u32) -> (u8, u8, u8) {
    [(31, 90, 180), (20, 130, 60), (200, 80, 10), (130, 40, 150)][(warp % 4) as usize]
}
