//! Log lines, recorded by the host with the component's and the resource's names.

use crate::bindings::orkestra::operator::log::{Level, log};

pub fn debug(message: &str) {
    log(Level::Debug, message);
}

pub fn info(message: &str) {
    log(Level::Info, message);
}

pub fn warn(message: &str) {
    log(Level::Warn, message);
}

pub fn error(message: &str) {
    log(Level::Error, message);
}
