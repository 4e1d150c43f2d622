//! The end-of-run PNG: train loss and test accuracy per epoch, side by side.
//! Rendered headless with a bundled font (DejaVu Sans Mono, licence in
//! `assets/DejaVu-LICENSE`), so no system fonts are needed.

use crate::error::TrainError;
use crate::session::EpochRecord;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
static REGISTER: Once = Once::new();

fn register() {
    REGISTER.call_once(|| {
        // Every family name plotters may ask for maps to the bundled font.
        for family in ["sans-serif", "serif", "monospace"] {
            plotters::style::register_font(family, FontStyle::Normal, FONT)
                .unwrap_or_else(|_| panic!("bundled font parses"));
        }
    });
}

/// Writes `path` (PNG, 1000×420): train loss and test accuracy (%) by epoch.
pub fn plot_run(epochs: &[EpochRecord], title: &str, path: &Path) -> Result<(), TrainError> {
    register();
    let e = |x: Box<dyn std::error::Error>| {
        TrainError::Run(format!("plotting {}: {x}", path.display()))
    };
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let root = BitMapBackend::new(path, (1000, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 20))?;
        let (left, right) = root.split_horizontally(500);
        let n = epochs.iter().map(|r| r.epoch + 1).max().unwrap_or(1);
        let xs = |r: &EpochRecord| r.epoch + 1;

        let lmax = epochs
            .iter()
            .map(|r| r.train_loss)
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.1;
        let mut c = ChartBuilder::on(&left)
            .caption("train loss", ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(48)
            .build_cartesian_2d(0u64..n + 1, 0.0..lmax)?;
        c.configure_mesh()
            .x_desc("epoch")
            .x_labels((n as usize + 2).min(12))
            .draw()?;
        c.draw_series(LineSeries::new(
            epochs.iter().map(|r| (xs(r), r.train_loss)),
            &BLUE,
        ))?;
        c.draw_series(
            epochs
                .iter()
                .map(|r| Circle::new((xs(r), r.train_loss), 3, BLUE.filled())),
        )?;

        let mut c = ChartBuilder::on(&right)
            .caption("test accuracy (%)", ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(48)
            .build_cartesian_2d(0u64..n + 1, 0.0..100.0)?;
        c.configure_mesh()
            .x_desc("epoch")
            .x_labels((n as usize + 2).min(12))
            .draw()?;
        c.draw_series(LineSeries::new(
            epochs.iter().map(|r| (xs(r), 100.0 * r.test_acc)),
            &RED,
        ))?;
        c.draw_series(
            epochs
                .iter()
                .map(|r| Circle::new((xs(r), 100.0 * r.test_acc), 3, RED.filled())),
        )?;
        root.present()?;
        Ok(())
    };
    draw().map_err(e)
}
