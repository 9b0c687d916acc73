//! The SVG chart of a run: µs per task against T, one line per mode, a panel per K.

use crate::{median, Row, MODES};

pub fn plot(rows: &[Row], device: &str, path: &std::path::Path) {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let panels = root.split_evenly((1, 2));
    let colors = [
        RED,
        BLUE,
        GREEN,
        BLACK,
        MAGENTA,
        CYAN,
        RGBColor(255, 140, 0),
        RGBColor(128, 0, 128),
        RGBColor(0, 128, 128),
        RGBColor(128, 128, 0),
        RGBColor(100, 100, 100),
        RGBColor(0, 0, 128),
        RGBColor(128, 0, 0),
    ];
    for (panel, k) in panels.iter().zip([1u32, 1000]) {
        let pts = |mode: &str| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|r| r.mode == mode && r.k == k && r.n == 1024)
                .map(|r| {
                    let mut v = r.us.clone();
                    (r.tasks as f64, median(&mut v))
                })
                .collect()
        };
        let all: Vec<(f64, f64)> = MODES.iter().flat_map(|m| pts(m)).collect();
        if all.is_empty() {
            continue;
        }
        let ymax = all.iter().map(|p| p.1).fold(1.0, f64::max) * 2.0;
        let ymin = all.iter().map(|p| p.1).fold(f64::MAX, f64::min) / 2.0;
        let xmax = all.iter().map(|p| p.0).fold(1.0, f64::max) * 2.0;
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{device}: mix, n=1024, K={k}"), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d((0.5f64..xmax).log_scale(), (ymin.max(0.01)..ymax).log_scale())
            .unwrap();
        chart.configure_mesh().x_desc("tasks T").y_desc("µs per task (median)").draw().unwrap();
        for (mode, color) in MODES.iter().zip(colors) {
            let p = pts(mode);
            chart
                .draw_series(LineSeries::new(p.clone(), color.stroke_width(2)))
                .unwrap()
                .label(*mode)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            chart.draw_series(p.into_iter().map(|(x, y)| Circle::new((x, y), 3, color.filled()))).unwrap();
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().unwrap();
    }
    root.present().unwrap();
}
