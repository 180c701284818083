//! rofi core: OFI tag layouts, provider filtering and the synchronous-send protocol (sans-IO)
