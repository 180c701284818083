//! rusnic protocol core: reliable, ordered, windowed delivery over unreliable datagrams (sans-IO)
