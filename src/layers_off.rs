//! Test-only switches that turn one safety layer off in one member, so that
//! a test can watch another layer keep the promise alone: the layers cover
//! for each other, and a layer that broke would otherwise go unnoticed
//! until the one covering it changed too.
//!
//! `NELI_TEST_LAYERS_OFF=claims,lease` is read only by debug builds; a
//! release build compiles [`off`] to `false` and has no way to weaken its
//! own safety.

/// A layer a test may switch off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// Other members' records: their claims, runs and tokens never reach
    /// the core, so it leads as soon as its own heartbeat is fresh.
    Claims,
    /// The shim's lease: it is granted without end, so only neli-run's own
    /// stop, fence or death ends the command.
    Lease,
}

impl Layer {
    fn name(self) -> &'static str {
        match self {
            Layer::Claims => "claims",
            Layer::Lease => "lease",
        }
    }
}

/// Says which layers are off, so that no log of such a run passes for a
/// normal one (and a test can check that its switch took).
pub fn warn_if_any() {
    for layer in [Layer::Claims, Layer::Lease] {
        if off(layer) {
            tracing::warn!(layer = layer.name(), "TEST BUILD: a safety layer is switched off (NELI_TEST_LAYERS_OFF)");
        }
    }
}

/// Whether a test switched `layer` off (always false in a release build).
#[cfg(debug_assertions)]
pub fn off(layer: Layer) -> bool {
    std::env::var("NELI_TEST_LAYERS_OFF").is_ok_and(|v| v.split(',').any(|l| l.trim() == layer.name()))
}

/// Whether a test switched `layer` off (always false in a release build).
#[cfg(not(debug_assertions))]
pub fn off(_: Layer) -> bool {
    false
}
