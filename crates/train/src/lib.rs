//! train: training with the certified step. Data readers (IDX, CIFAR-10
//! binary, the embedded Fashion-MNIST subset), the host loop that executes the
//! rendered train step and eval forward (`session`), the host schedule,
//! atomic safetensors checkpoints with exact resume, and the run plot.

pub mod checkpoint;
pub mod data;
pub mod error;
pub mod interrupt;
pub mod plot;
pub mod schedule;
pub mod session;

pub use checkpoint::{checkpoint_path, Checkpoint, CHECKPOINT_FILE};
pub use data::{Augment, Dataset, Split};
pub use error::TrainError;
pub use session::{
    read_epochs, read_metrics, resume, resume_with, run, Certification, CertifyBudget,
    CertifyChoice, EpochRecord, Estimate, MetricsLine, RecipeConfig, RunOptions, RunSummary,
    Session, StepRecord, Subject, TrainConfig, METRICS_FILE,
};
